from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import shared
from typer.testing import CliRunner

from momentsearch.cli.main import app
from momentsearch.data.loaders import load_corpus
from momentsearch.evaluation import Submission
from momentsearch.search.baselines import annotation_oracle, random_ranker

runner = CliRunner()


def test_help_lists_every_command() -> None:
    out = runner.invoke(app, ["--help"]).output
    for cmd in ("data", "generate", "evaluate-predictions", "demo"):
        assert cmd in out
    out = runner.invoke(app, ["data", "--help"]).output
    assert "info" in out and "convert" in out


def test_data_info_json_on_real_file() -> None:
    res = runner.invoke(app, ["data", "info", str(shared("charades_sta/charades_sta_test.txt")), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["format"] == "charades-sta"
    assert (info["n_queries"], info["n_videos"]) == (3720, 1334)
    assert info["quirks"] == {"end_after_duration": 562}
    res = runner.invoke(app, ["data", "info", str(shared("didemo/val_data.json")), "--format", "didemo"])
    assert res.exit_code == 0 and "4,180" in res.output


def test_generate_then_evaluate_predictions(tmp_path: Path) -> None:
    res = runner.invoke(app, ["generate", "--preset", "tiny", "--out", str(tmp_path / "b"), "--n-videos", "20"])
    assert res.exit_code == 0, res.output
    assert "20 videos" in res.output
    gt = tmp_path / "b" / "tvr" / "tvr_test_release.jsonl"
    corpus = load_corpus(gt)
    Submission.from_ranked(annotation_oracle(corpus)).write(tmp_path / "oracle.json")
    res = runner.invoke(app, ["evaluate-predictions", str(tmp_path / "oracle.json"), "--ground-truth", str(gt), "--json"])
    assert res.exit_code == 0, res.output
    def strict(c: str) -> None:
        raise AssertionError(f"non-standard JSON constant {c}")

    metrics = json.loads(res.output, parse_constant=strict)  # no NaN: the synthetic data has no type-t queries
    assert metrics["VCMR_by_type"]["t-0.5-r1"] is None and metrics["VCMR_by_type"]["v-0.5-r1"] == 100.0
    assert metrics["VCMR"]["0.5-r1"] == 100.0 and metrics["VR"]["r1"] == 100.0 and metrics["SVMR"]["0.7-r1"] == 100.0
    assert set(metrics) >= {"VCMR", "SVMR", "VR", "VCMR_by_type"}
    Submission.from_ranked(random_ranker(corpus, seed=1)).write(tmp_path / "random.json")
    res = runner.invoke(app, ["evaluate-predictions", str(tmp_path / "random.json"), "-g", str(gt), "--iou", "0.5",
                              "--ks", "1,100", "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "m.json").read_text())
    assert list(saved["VCMR"]) == ["0.5-r1", "0.5-r100"]


def test_errors_exit_2_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "charades_sta_test.txt"
    bad.write_text("AO8RW 0.0 6.9##ok\nbroken line\n")
    proc = subprocess.run([sys.executable, "-m", "momentsearch.cli", "data", "info", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"error: {bad}:2: expected 'VIDEOID START END##sentence'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "momentsearch.cli", "evaluate-predictions", str(tmp_path / "none.json"),
                           "--ground-truth", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "error:" in proc.stderr


def test_version_and_estimated_durations_are_reported(tmp_path: Path) -> None:
    import momentsearch

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"momentsearch {momentsearch.__version__}"
    import tomllib  # the one version: pyproject's, which checkpoint headers record through momentsearch.version

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert momentsearch.__version__ == pyproject["project"]["version"]
    lone = tmp_path / "charades_sta_test.txt"  # no Charades_v1_test.csv beside it
    lone.write_text("AO8RW 0.0 6.9##a person is putting a book on a shelf.\nAO8RW 2.0 9.5##person opens the door.\n")
    res = runner.invoke(app, ["data", "info", str(lone), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["videos_with_estimated_duration"] == 1
    res = runner.invoke(app, ["data", "info", str(lone)])
    assert "estimated durations" in res.output and "lower bound" in res.output


def test_only_the_projects_errors_are_caught_a_bug_shows_its_traceback(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from momentsearch.cli import main as cli_main
    from momentsearch.errors import ConfigError

    def project_error(**_: object) -> None:
        raise ConfigError("x.yaml: unknown key(s) ['hiden']")

    monkeypatch.setattr(cli_main, "app", project_error)
    with pytest.raises(SystemExit) as e:
        cli_main.main()
    assert e.value.code == 2

    def bug(**_: object) -> None:
        raise KeyError("a programming error")

    monkeypatch.setattr(cli_main, "app", bug)
    with pytest.raises(KeyError):
        cli_main.main()


def test_the_library_never_imports_the_cli() -> None:
    import re

    pattern = re.compile(r"^\s*(from|import) momentsearch\.cli\b", re.M)
    assert pattern.search("    from momentsearch.cli.main import app") and pattern.search("import momentsearch.cli")
    assert not pattern.search("from momentsearch.client import Client")  # another module, not the CLI
    src = Path(__file__).resolve().parents[1] / "src" / "momentsearch"
    offenders = [str(p.relative_to(src)) for p in src.rglob("*.py") if p.relative_to(src).parts[0] not in ("cli", "__main__.py")
                 and pattern.search(p.read_text())]
    assert offenders == []


def outcome(res) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """(exit status, message) as `momentsearch` reports them: the project's errors exit 2 (main() prints them)."""
    from momentsearch.errors import MomentSearchError

    if isinstance(res.exception, MomentSearchError):
        return 2, str(res.exception)
    return res.exit_code, res.output


def test_bad_cli_arguments_are_refused_with_a_readable_error(tmp_path: Path) -> None:
    import os

    res = runner.invoke(app, ["generate", "--preset", "tiny", "--out", str(tmp_path / "b"), "--n-videos", "12"])
    assert res.exit_code == 0, res.output
    gt = str(tmp_path / "b" / "tvr" / "tvr_test_release.jsonl")
    corpus = load_corpus(gt)
    pred = tmp_path / "random.json"
    Submission.from_ranked(random_ranker(corpus, seed=1)).write(pred)
    # out-of-range thresholds and cut-offs (--iou -0.5 used to report R@1 = 100 for random predictions)
    for opt, val in (("--iou", "-0.5"), ("--iou", "1.5"), ("--ks", "0"), ("--ks", "-1"), ("--ks", "a")):
        res = runner.invoke(app, ["evaluate-predictions", str(pred), "-g", gt, opt, val])
        assert res.exit_code == 2 and ("must lie in" in res.output or "integers" in res.output), (opt, val, res.output)
    # --out naming a folder, a path under a file, or (generate / demo) an existing file
    (tmp_path / "plain").write_text("x")
    cases = [
        (["evaluate-predictions", str(pred), "-g", gt, "--out", str(tmp_path)], "is a folder"),
        (["data", "convert", gt, "--out", str(tmp_path)], "is a folder"),
        (["data", "convert", gt, "--out", str(tmp_path / "plain" / "c.jsonl")], "plain is a file"),
        (["generate", "--preset", "tiny", "--out", str(tmp_path / "plain")], "is a file"),
        (["relevance", "--dataset", gt, "--proxy", "bow", "--out", str(tmp_path)], "is a folder"),
    ]
    for args, message in cases:
        code, text = outcome(runner.invoke(app, args))
        assert code == 2 and message in text, (args, text)
    assert (tmp_path / "plain").read_text() == "x"
    for k in ("0", "-1"):  # used to print every moment
        res = runner.invoke(app, ["search", str(tmp_path / "none.pt"), "a query", "-k", k])
        assert res.exit_code == 2 and "-k" in res.output
    # a named pipe is refused instead of blocking forever
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    code, text = outcome(runner.invoke(app, ["data", "info", str(fifo)]))
    assert code == 2 and "not a regular file" in text
    # a 1,000,000-character field is echoed cut, not in full
    big = tmp_path / "charades_sta_test.txt"
    big.write_text("v1 0 x" + "9" * 1_000_000 + "##a person sits\n")
    code, text = outcome(runner.invoke(app, ["data", "info", str(big)]))
    assert code == 2 and "START and END must be numbers" in text and len(text) < 1200
