from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# Under pytest-xdist (make test: -n 2) each worker gets its share of the cores. Torch's default, one thread
# per core in every worker, oversubscribes them: two workers training at once then wait on each other's
# spinning threads: the three training modules (MINUTE, MMN/CET/BET, XML) took 9:49 so, 3:54 with a share each.
XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
WORKER_THREADS = max(1, (os.cpu_count() or 1) // XDIST_WORKERS)
if XDIST_WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(WORKER_THREADS))  # before torch is imported, and for subprocesses

# The CPU's feature flags as Linux lists them: the compiled SIMD paths must be on exactly where the CPU has them
# (the project's machines have had AVX-512; some have only AVX2, where the portable paths run)
CPU_FLAGS = frozenset(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else frozenset()
HAS_AVX512 = {"avx512f", "fma"} <= CPU_FLAGS  # what text/_linear.c asks of the CPU

# The trained-model tests train with this seed and thread count (benchmarks/test_margins.py varies them;
# threads 0 leaves torch's own setting: the worker's share under xdist) and record each margin with `margin`.
TEST_SEED = int(os.environ.get("MOMENTSEARCH_TEST_SEED", "0"))
TEST_THREADS = int(os.environ.get("MOMENTSEARCH_TEST_THREADS", "0"))

SHARED_DATA = Path(os.environ.get("MOMENTSEARCH_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    if XDIST_WORKERS > 1 and os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# `make test` (and so CI) sets MOMENTSEARCH_REQUIRE_EXTRAS=1: there a missing extra (PyAV, FAISS, FastAPI, Ray,
# Playwright, WordNet...) fails the run loudly instead of skipping whole modules; a bare `pytest` still skips them.
REQUIRE_EXTRAS = os.environ.get("MOMENTSEARCH_REQUIRE_EXTRAS") == "1"
if REQUIRE_EXTRAS:
    _importorskip = pytest.importorskip

    def _required(modname: str, *args: object, **kwargs: object) -> object:
        try:
            return _importorskip(modname, *args, **kwargs)
        except pytest.skip.Exception as e:
            raise ImportError(f"{modname} is missing, and make test requires every extra "
                              f"(MOMENTSEARCH_REQUIRE_EXTRAS=1; run `make setup`): {e}") from None

    pytest.importorskip = _required  # type: ignore[assignment]


def missing_dependency(message: str) -> None:
    """A dependency a test needs is not installed: a skip for a bare pytest, a failure under make test."""
    if REQUIRE_EXTRAS:
        pytest.fail(f"{message} (make test requires it: MOMENTSEARCH_REQUIRE_EXTRAS=1)")
    pytest.skip(message, allow_module_level=True)


MISSING_REAL_DATA = "real annotation file {} not present (set MOMENTSEARCH_SHARED_DATA)"  # the skip's reason


def xml_experiment(tmp_path: Path, bench: Path) -> Path:
    """An experiment YAML over the tiny benchmark ``bench``: one condition (XML, 32 hidden), seed 0, one epoch,
    runs under ``tmp_path/runs`` and results under ``tmp_path/out``."""
    train = tmp_path / "train.yaml"
    train.write_text("epochs: 1\nbatch_size: 32\nlr: 0.001\nval_split: test\nval_max_queries: 20\nnum_threads: 1\n"
                     "model: {name: xml, hidden: 32}\n")
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"name: t\npreset: tiny\ntrain: {train}\nbenchmark_dir: {bench}\nout_dir: {tmp_path / 'out'}\n"
                   f"runs_dir: {tmp_path / 'runs'}\nseeds: [0]\nconditions:\n  XML: {{}}\n")
    return cfg


def shared(rel: str) -> Path:
    p = SHARED_DATA / rel
    if not p.exists():
        pytest.skip(MISSING_REAL_DATA.format(p))
    return p


# The rule for `slow` (README): a test that takes SLOW_SECONDS or more on 2 cores is marked slow, so that
# `pytest -m "not slow"` is a quick check. The summary names the tests that break the rule in this run.
SLOW_SECONDS = 5.0
_durations: dict[str, tuple[float, bool]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.passed or report.failed:
        spent, marked = _durations.get(report.nodeid, (0.0, "slow" in report.keywords))
        _durations[report.nodeid] = (spent + report.duration, marked)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say out loud when the real-data tests did not run, and why; and which tests break the `slow` rule. Both
    read the reports, which under pytest-xdist reach this (the controller's) process from the workers."""
    reason = re.compile(re.escape(MISSING_REAL_DATA).replace(r"\{\}", r"(\S+)"))
    missing = sorted({m.group(1) for r in terminalreporter.stats.get("skipped", [])
                      if (m := reason.search(str(r.longrepr)))})
    unmarked = sorted((t, n) for n, (t, marked) in _durations.items() if t >= SLOW_SECONDS and not marked)
    if unmarked:
        workers = getattr(terminalreporter.config.option, "numprocesses", None)  # pytest-xdist's -n
        sharing = f" (each in one of {workers} workers sharing the cores)" if workers else ""
        terminalreporter.write_sep("-", f"{len(unmarked)} test(s) took {SLOW_SECONDS:g} s or more without the slow mark"
                                        + sharing)
        for t, n in unmarked[::-1][:20]:
            terminalreporter.write_line(f"{t:6.1f} s  {n}")
    modules: dict[str, float] = {}
    for n, (t, _) in _durations.items():
        modules[n.split("::")[0]] = modules.get(n.split("::")[0], 0.0) + t
    if modules:  # where make test's time goes (setup, call and teardown of each test, summed per module)
        top = sorted(modules.items(), key=lambda kv: -kv[1])[:12]
        terminalreporter.write_sep("-", f"the {len(top)} slowest test modules of {len(modules)}: "
                                        f"{sum(modules.values()):.0f} s of tests in all")
        for n, t in top:
            terminalreporter.write_line(f"{t:6.1f} s  {n}")
    if missing:
        terminalreporter.write_sep("!", f"real-data test(s) SKIPPED: {SHARED_DATA} does not hold {missing[:3]}...; "
                                        "set MOMENTSEARCH_SHARED_DATA to the folder with TVR, Charades-STA, DiDeMo, "
                                        "ActivityNet Captions and TACoS")


@pytest.fixture
def margin(request: pytest.FixtureRequest):
    """``margin(name, measured, bar)``: assert measured >= bar; with MOMENTSEARCH_MARGINS=FILE, also append
    the measurement (test, check, measured, bar, seed, threads) to FILE as a JSON line."""
    import json

    def check(name: str, measured: float, bar: float, context: object = "") -> None:
        out = os.environ.get("MOMENTSEARCH_MARGINS")
        if out:
            with open(out, "a") as fh:
                fh.write(json.dumps({"test": request.node.nodeid, "check": name, "measured": float(measured),
                                     "bar": float(bar), "seed": TEST_SEED, "threads": TEST_THREADS}) + "\n")
        assert measured >= bar, f"{name}: measured {measured:.2f} < bar {bar:.2f} {context}"

    return check


@pytest.fixture(scope="session")
def tiny_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from momentsearch.data.synthetic import generate, load_preset

    root = tmp_path_factory.mktemp("tiny")
    ready = os.environ.get("MOMENTSEARCH_TINY_BENCHMARK")  # a generated tiny preset, queries cached (GPU runs)
    if ready:
        import shutil

        shutil.copytree(ready, root, dirs_exist_ok=True)
        return root
    generate(load_preset("tiny"), root, progress=False)
    return root


def require_chromium() -> str:
    """The path of Debian's chromium for the page tests; a missing one fails `make test` loudly (never a skip)."""
    import shutil

    if not shutil.which("chromium"):
        missing_dependency("no chromium on PATH: `make test` installs Debian's package (apt-get install chromium) "
                           "where apt is allowed")
    return shutil.which("chromium") or "/usr/bin/chromium"
