"""Shared bits of the benchmark scripts: timing, peak memory, the results table and JSON."""

from __future__ import annotations

import json
import platform
import resource
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from momentsearch.experiments import Continuation

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]


def command_line() -> str:
    """The command that ran this script, as a shell would read it back: ``python benchmarks/<script>.py ...``
    (relative to the project when the script is in it), each argument quoted where it needs to be."""
    script = Path(sys.argv[0]).resolve()
    name = script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT) else sys.argv[0]
    return "python " + shlex.join([name, *sys.argv[1:]])


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(name: str, rows: list[dict[str, Any]], command: str, out: Path | None = None,
           extra: dict[str, Any] | None = None) -> None:
    """Print the table; write the JSON to ``out`` (default ``results/<name>.json``), with ``extra``'s keys beside
    the rows."""
    cols = list(rows[0])
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in cols]
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(_fmt(r[c]).ljust(w) for c, w in zip(cols, widths)))
    RESULTS.mkdir(exist_ok=True)
    out = out or RESULTS / f"{name}.json"
    out.write_text(json.dumps({
        "command": command, "machine": f"{platform.machine()}, {platform.python_version()}",
        "rows": rows, **(extra or {}),
    }, indent=2) + "\n")
    print(f"\nwrote {out}")


def interval(r: dict[str, Any]) -> str:
    """A stored paired difference (keys mean, low, high) as "+mean [+low, +high]"."""
    return f"{r['mean']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}]"


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def render_and_ingest(preset: str, out: Path, times: dict[str, float]) -> tuple[Path, Path, Any]:
    """``generate --preset`` into ``out/benchmark`` (when missing), render every video (64 x 64, 4 fps, H.264 +
    SRT; kept ones are kept) and ingest them with the builtin encoder (2 s clips, 2 fps) into ``out/corpus``;
    the render and ingest seconds go into ``times``. Returns (benchmark folder, corpus folder, ingest report)."""
    from momentsearch.data.synthetic import generate, load_preset
    from momentsearch.data.synthetic.render import render_benchmark
    from momentsearch.video.ingest import ingest

    bench, corpus = out / "benchmark", out / "corpus"
    if not (bench / "benchmark.yaml").is_file():
        generate(load_preset(preset), bench)
    t = time.perf_counter()
    render_benchmark(bench)
    times["render_s"] = time.perf_counter() - t
    t = time.perf_counter()
    report = ingest(bench / "videos", corpus, "builtin", clip_seconds=2.0, fps=2.0)
    times["ingest_s"] = time.perf_counter() - t
    return bench, corpus, report


def test_videos_and_random_clip(out: Path, bench: Path, test_ids: list[str]) -> tuple[Path, Path]:
    """``out/videos_test`` (links to the rendered test videos and their SRTs) and ``out/random_clip`` (the random
    tiny CLIP in Hugging Face's layout, ``tests/clip_models.tiny_hf_clip``, projection 64), each made once."""
    from clip_models import tiny_hf_clip

    test_dir = out / "videos_test"
    test_dir.mkdir(parents=True, exist_ok=True)
    for v in test_ids:
        for suffix in (".mp4", ".srt"):
            src, dst = bench / "videos" / f"{v}{suffix}", test_dir / f"{v}{suffix}"
            if src.is_file() and not dst.exists():
                dst.symlink_to(src.resolve())
    hf = out / "random_clip"
    if not (hf / "config.json").is_file():
        tiny_hf_clip(hf, projection_dim=64)
    return test_dir, hf


def add_continuation_flags(ap: Any) -> None:
    """``--continue-rising``, ``--max-epochs`` and ``--trend-window`` as ``momentsearch experiment`` takes them."""
    ap.add_argument("--continue-rising", type=int, default=0, help="as `momentsearch experiment --continue-rising`: "
                    "each (condition, seed) is read from the last run of its chain of continuations")
    ap.add_argument("--max-epochs", type=int, default=0, help="as `momentsearch experiment --max-epochs`")
    ap.add_argument("--trend-window", type=int, default=10, help="the last epochs of the trend test")
    ap.add_argument("--convergence", default="trend", choices=("trend", "equivalence"),
                    help="as `momentsearch experiment --convergence`: the rule that ended each chain")
    ap.add_argument("--tolerance", type=float, default=None,
                    help="as `momentsearch experiment --tolerance` (the equivalence rule's points per epoch)")


def continuation_of(args: Any) -> Continuation | None:
    """The ``Continuation`` those flags name, or None without them. The rule must be the experiment's: a chain
    continued until the equivalence rule passed is read to its end only under that rule (the trend test would
    stop at its first run that passes the trend test)."""
    from momentsearch.experiments import Continuation
    from momentsearch.experiments.stats import EQUIVALENCE_TOLERANCE

    if not (args.continue_rising or args.max_epochs):
        return None
    tol = EQUIVALENCE_TOLERANCE if args.tolerance is None else args.tolerance
    return Continuation(args.continue_rising, args.max_epochs, args.trend_window, args.convergence, tol)


def _rule_flags(args: Any) -> str:
    if getattr(args, "convergence", "trend") == "trend":
        return ""
    return f" --convergence {args.convergence} --trend-window {args.trend_window}" + (
        "" if args.tolerance is None else f" --tolerance {args.tolerance}")


def chain_end(d: dict[str, Any], cont: Continuation | None, run: str, experiment: Path, args: Any) -> dict[str, Any]:
    """The last finished run of ``d``'s chain of continuations; exits naming the command that finishes it, or
    when the run was trained on other inputs than its config reads now (``experiments.inputs``)."""
    from momentsearch.errors import ConfigError
    from momentsearch.experiments import final_run
    from momentsearch.experiments.inputs import check_inputs

    d, missing = final_run(d, cont)
    if missing is not None:
        raise SystemExit(f"error: {run} still rises at {d['epochs']} epochs and its continuation to "
                         f"{missing['epochs']} has not finished; run `momentsearch experiment {experiment} "
                         f"--continue-rising {args.continue_rising} --max-epochs {args.max_epochs}"
                         f"{_rule_flags(args)}` first")
    try:
        check_inputs(Path(d["out_dir"]), d, record=False)
    except ConfigError as e:
        raise SystemExit(f"error: {run}: {e}") from None
    return d


def stored_flatness(run: dict[str, Any], window: int, tolerance: float) -> dict[str, Any]:
    """The equivalence rule (``experiments.stats.flatness``) on each validation curve a stored run row of
    benchmarks/convergence.py keeps (VR up to the end of its phase): curve name -> its flatness."""
    from momentsearch.experiments.continuation import curve_flatness

    curves = {k: v for k, v in (run.get("curves") or {}).items() if isinstance(v, list) and v}
    if not curves:
        return {}
    return curve_flatness(curves, int(run.get("vr_phase_end") or len(next(iter(curves.values())))), window, tolerance)
