"""Fuzz every annotation loader and the prediction reader with malformed files.

For each format, a small valid file is mutated N times (truncation, bit flips, inserted and deleted
bytes, invalid UTF-8, numbers swapped for NaN / inf / huge / negative / denormal values, strings
swapped for empty, huge, lone-surrogate or wrongly typed values, deep nesting, duplicated lines or
records, a BOM, CRLF line ends, JSON values of the wrong type, removed keys). Each mutant goes
through what a user would run on it: the loader, ``corpus.stats()`` (``data info``) and the jsonl
writer (``data convert``); for predictions, ``Submission.read`` and ``evaluate_submission``.

An outcome is *loaded*, *project error* (a ``MomentSearchError``), *foreign exception* (anything
else: a bug) or *hang* (over 10 s). The script prints a table, writes JSON, and lists the first
foreign exceptions of each kind with the mutation that caused them.

    python benchmarks/fuzz_loaders.py --n 10000     # writes benchmarks/results/fuzz_loaders.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.fuzz_mutations import mutate  # noqa: E402
from benchmarks.fuzz_targets import TARGETS, apply_mutant, fixtures  # noqa: E402

from momentsearch.data.corpus import Corpus  # noqa: E402
from momentsearch.data.loaders import (  # noqa: E402
    iter_jsonl_corpus,
    load_activitynet,
    load_charades_sta,
    load_didemo,
    load_jsonl_corpus,
    load_tacos,
    load_tvr,
    load_tvr_ranking,
    write_jsonl_corpus,
)
from momentsearch.errors import MomentSearchError  # noqa: E402
from momentsearch.evaluation import Submission, evaluate_submission  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402

J = json.dumps
SEEDS: dict[str, tuple[str, str]] = {  # format -> (file name, valid content)
    "charades-sta": ("charades_sta_test.txt", "AO8RW 0.0 6.9##a person is putting a book on a shelf.\n"
                                              "AO8RW 2.0 9.5##the person opens the door.\nY6R7T 1.1 4.0##a man sits\n"),
    "charades-csv": ("Charades_v1_test.csv", "id,subject,scene,length\nAO8RW,HR43,Kitchen,30.5\nY6R7T,HR44,Bedroom,22.0\n"),
    "tvr": ("tvr_val_release.jsonl", "".join(J(r) + "\n" for r in [
        {"desc_id": 1, "desc": "he sits down", "vid_name": "friends_s01", "duration": 60.2, "ts": [1.5, 9.0], "type": "v"},
        {"desc_id": 2, "desc": "she says hi", "vid_name": "friends_s02", "duration": 40.0, "ts": [0.0, 3.0], "type": "t"},
    ])),
    "tvr-video2dur": ("tvr_video2dur_idx.json", J({"val": {"friends_s01": [60.2, 0], "friends_s02": [40.0, 1]}})),
    "tvr-subtitles": ("tvqa_preprocessed_subtitles.jsonl", J({"vid_name": "friends_s01", "sub": [
        {"start": 0.5, "end": 2.0, "text": "Hi."}, {"start": 2.5, "end": 4.0, "text": "Hello there."}]}) + "\n"),
    "didemo": ("didemo_val.json", J([
        {"annotation_id": 1, "description": "a dog runs", "video": "v1.mp4", "times": [[0, 1], [0, 1], [1, 1], [0, 0]],
         "num_segments": 6, "context": [0, 1]},
        {"annotation_id": 2, "description": "the dog stops", "video": "v1.mp4", "times": [[2, 3]] * 4, "num_segments": 6},
    ])),
    "activitynet": ("activitynet_val.json", J({
        "v_a": {"duration": 20.0, "timestamps": [[1.0, 5.0], [4.0, 19.5]], "sentences": ["a man runs", " he jumps"]},
        "v_b": {"duration": 31.3, "timestamps": [[0.0, 31.3]], "sentences": ["people dance"]},
    })),
    "tacos": ("tacos_test.json", J({
        "s13-d21.avi": {"num_frames": 300, "fps": 29.4, "timestamps": [[0, 60], [90, 299]], "sentences": ["he cuts", "x"]},
    })),
    "jsonl": ("corpus.jsonl", "".join(J(r) + "\n" for r in [
        {"record": "header", "format": "momentsearch-corpus", "version": 1, "name": "t"},
        {"record": "video", "video_id": "v1", "duration": 30.0, "split": "test", "clip_length": 2.0,
         "subtitles": [[0.0, 2.0, "hi"]], "meta": {}},
        {"record": "moment", "query_id": "q1", "text": "a man sits", "video_id": "v1", "spans": [[1.0, 4.0]],
         "split": "test", "query_type": "v", "meta": {}},
    ])),
    "tvr-ranking": ("tvr_ranking_val.json", J([
        {"pair_id": 0, "query_id": 7, "query": "a man opens a door", "video_name": "v1", "timestamp": [2.0, 6.0],
         "duration": 30.0, "caption": "he opens it", "similarity": 0.9, "relevance": 4},
        {"pair_id": 1, "query_id": 7, "query": "a man opens a door", "video_name": "v2", "timestamp": [1.0, 8.0],
         "duration": 20.0, "caption": "a door", "similarity": 0.5, "relevance": 2.33},
    ])),
    "tvr-ranking-grouped": ("tvr_ranking_test.jsonl", "".join(J(r) + "\n" for r in [
        {"query_id": 7, "query": "a man opens a door", "relevant_moment": [
            {"pair_id": 0, "video_name": "v1", "timestamp": [2.0, 6.0], "duration": 30.0, "caption": "he opens it",
             "similarity": 0.9, "relevance": 4},
            {"pair_id": 1, "video_name": "v2", "timestamp": [1.0, 25.0], "duration": 20.0, "caption": "a door",
             "similarity": 0.5, "relevance": 0}]},
        {"query_id": 8, "query": "she sits", "relevant_moment": []},
    ])),
    "predictions": ("predictions.json", J({"video2idx": {"friends_s01": 0, "friends_s02": 1}, "VCMR": [
        {"desc_id": 1, "desc": "he sits down", "predictions": [[0, 1.5, 9.0, 0.9], [1, 0.0, 3.0, 0.5]]},
        {"desc_id": 2, "desc": "she says hi", "predictions": [[1, 0.0, 3.0, 0.8]]}],
        "SVMR": [{"desc_id": 1, "desc": "he sits down", "predictions": [[0, 1.0, 8.0, 0.7]]},
                 {"desc_id": 2, "desc": "she says hi", "predictions": [[1, 0.5, 3.0, 0.8]]}],
        "VR": [{"desc_id": 1, "desc": "he sits down", "predictions": [[0, -1, -1, 0.9]]},
               {"desc_id": 2, "desc": "she says hi", "predictions": [[1, -1, -1, 0.8]]}]})),
}

def user_actions(fmt: str, path: Path, folder: Path) -> Callable[[], Any]:
    """What a user would run on the file: load it, ``data info`` (stats), ``data convert`` (jsonl writer)."""
    def corpus_actions(load: Callable[[], Corpus]) -> Callable[[], Any]:
        def run() -> Any:
            c = load()
            c.stats()
            write_jsonl_corpus(c, folder / "converted.jsonl")
            return c
        return run

    good = {name: folder / f for name, (f, _) in SEEDS.items()}
    return {
        "charades-sta": corpus_actions(lambda: load_charades_sta(path, good["charades-csv"])),
        "charades-csv": corpus_actions(lambda: load_charades_sta(good["charades-sta"], path)),
        "tvr": corpus_actions(lambda: load_tvr(path, good["tvr-video2dur"], good["tvr-subtitles"], split="val")),
        "tvr-video2dur": corpus_actions(lambda: load_tvr(good["tvr"], path, good["tvr-subtitles"], split="val")),
        "tvr-subtitles": corpus_actions(lambda: load_tvr(good["tvr"], good["tvr-video2dur"], path, split="val")),
        "didemo": corpus_actions(lambda: load_didemo(path)),
        "activitynet": corpus_actions(lambda: load_activitynet(path)),
        "tacos": corpus_actions(lambda: load_tacos(path)),
        "jsonl": corpus_actions(lambda: (list(iter_jsonl_corpus(path)), list(iter_jsonl_corpus(path, moments=False)),
                                         load_jsonl_corpus(path))[-1]),  # the streamed reader, then the whole
        "tvr-ranking": lambda: load_tvr_ranking(path),
        "tvr-ranking-grouped": lambda: load_tvr_ranking(path),
        "predictions": lambda: evaluate_submission(Submission.read(path), load_tvr(
            good["tvr"], good["tvr-video2dur"], good["tvr-subtitles"], split="val")),
    }[fmt]


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


def _run(action: Callable[[], Any], mutant: bytes | str, kind: str, i: int, timeout: int,
         outcomes: Counter[str], foreign: dict[str, dict[str, Any]], by_kind: Counter[str]) -> None:
    """Run one mutant's action and count its outcome."""
    example = mutant[:300].decode("utf-8", "replace") if isinstance(mutant, bytes) else mutant
    signal.alarm(timeout)
    try:
        action()
        outcomes["loaded"] += 1
    except MomentSearchError:
        outcomes["project error"] += 1
    except Hang:
        outcomes["hang"] += 1
        foreign.setdefault("Hang", {"count": 0, "mutation": kind, "example": example})
        foreign["Hang"]["count"] += 1
    except Exception as e:  # noqa: BLE001 - a foreign exception is what we are counting
        outcomes["foreign exception"] += 1
        frames = traceback.extract_tb(e.__traceback__)
        tb = frames[-1]
        ours = next((f for f in reversed(frames) if "/momentsearch/" in f.filename), None)
        key = f"{type(e).__name__} at {Path(tb.filename).name}:{tb.lineno}" + (
            f" (from {Path(ours.filename).name}:{ours.lineno})" if ours is not None and ours is not tb else "")
        by_kind[kind] += 1
        rec = foreign.setdefault(key, {"count": 0, "mutation": kind, "message": str(e)[:200],
                                       "example": example, "mutant": i})
        rec["count"] += 1
    finally:
        signal.alarm(0)


def _loop(name: str, n: int, seed: int, timeout: int,
          next_mutant: Callable[[random.Random], tuple[bytes | str, str]], action: Callable[[], Any]) -> dict[str, Any]:
    """``n`` mutants from ``next_mutant`` (which writes each), ``action`` run on each, the outcomes counted."""
    outcomes: Counter[str] = Counter()
    foreign: dict[str, dict[str, Any]] = {}
    by_kind: Counter[str] = Counter()
    rng = random.Random(seed)
    signal.signal(signal.SIGALRM, _alarm)
    for i in range(n):
        mutant, kind = next_mutant(rng)
        _run(action, mutant, kind, i, timeout, outcomes, foreign, by_kind)
    return {"format": name, "n": n, "outcomes": dict(outcomes), "foreign": foreign,
            "foreign_by_mutation": dict(by_kind)}


def fuzz(fmt: str, n: int, seed: int, folder: Path, timeout: int = 10) -> dict[str, Any]:
    if fmt in TARGETS:
        return fuzz_target(fmt, n, seed, folder, timeout)
    name, content = SEEDS[fmt]
    for f, c in SEEDS.values():  # every companion file valid
        (folder / f).write_text(c, encoding="utf-8")
    data = content.encode()
    path = folder / ("mutant_" + name)

    def next_mutant(rng: random.Random) -> tuple[bytes, str]:
        mutant, kind = mutate(data, rng)
        path.write_bytes(mutant)
        return mutant, kind

    return _loop(fmt, n, seed, timeout, next_mutant, user_actions(fmt, path, folder))


def fuzz_target(name: str, n: int, seed: int, folder: Path, timeout: int = 10) -> dict[str, Any]:
    """A reader of :mod:`fuzz_targets`: its file is restored from the real one before every mutant."""
    target = TARGETS[name]
    fix = fixtures(folder / "fixtures")
    work = folder / "work"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(fix, work, symlinks=True)
    return _loop(name, n, seed, timeout, lambda rng: apply_mutant(target, fix, work, rng), lambda: target.action(work))


def _one(job: tuple[str, int, int]) -> dict[str, Any]:
    """One format in a fresh temporary folder (a worker process of its own)."""
    fmt, n, seed = job
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        r = fuzz(fmt, n, seed, Path(tmp))
        r["seconds"] = round(time.time() - t0, 1)
    return r


def main() -> None:
    import warnings

    warnings.filterwarnings("ignore")  # numpy's and torch's warnings on broken files are not outcomes
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="mutants per format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", nargs="*", default=[*SEEDS, *TARGETS])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--jobs", type=int, default=1, help="formats fuzzed in parallel processes")
    args = ap.parse_args()
    unknown = sorted(set(args.formats) - set(SEEDS) - set(TARGETS))
    if unknown:
        ap.error(f"unknown formats {unknown}; known: {[*SEEDS, *TARGETS]}")
    results = []
    print(f"{'format':<17} {'mutants':>8} {'loaded':>8} {'project error':>14} {'foreign':>8} {'hang':>5} {'s':>6}")
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(args.jobs, maxtasksperchild=1) as pool:
        for r in pool.imap(_one, [(fmt, args.n, args.seed) for fmt in args.formats]):
            results.append(r)
            o = r["outcomes"]
            print(f"{r['format']:<17} {args.n:>8} {o.get('loaded', 0):>8} {o.get('project error', 0):>14} "
                  f"{o.get('foreign exception', 0):>8} {o.get('hang', 0):>5} {r['seconds']:>6}", flush=True)
            for key, rec in sorted(r["foreign"].items(), key=lambda kv: -kv[1]["count"])[:8]:
                print(f"    {rec['count']:>5} x {key} ({rec['mutation']}): {rec.get('message', '')[:120]}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "fuzz_loaders.json"
    results = _merged(path, results, args.n, args.seed)
    total = sum(r["outcomes"].get("foreign exception", 0) + r["outcomes"].get("hang", 0) for r in results)
    write_json(path, {"n_per_format": args.n, "seed": args.seed, "results": results, "foreign_and_hangs": total}, indent=1)
    print(f"foreign exceptions + hangs over {len(results)} formats x {args.n}: {total}; details in {path}")


def _merged(path: Path, results: list[dict], n: int, seed: int) -> list[dict]:
    """This run's formats replace theirs in the JSON a run with the same ``--n`` and ``--seed`` wrote (a
    ``--formats`` run adds to the full table instead of overwriting it); other settings start a new file."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return results
    if old.get("n_per_format") != n or old.get("seed") != seed:
        return results
    new = {r["format"]: r for r in results}
    kept = [new.pop(r["format"], r) for r in old.get("results", [])]
    return kept + list(new.values())


if __name__ == "__main__":
    main()
