"""Training with torch's dropout masks against hashed ones (``TrainConfig.dropout_masks``), in one run.

    python benchmarks/dropout_masks.py --benchmark runs/experiments/benchmarks/converge --rounds 3

1. The op on one tensor of attention weights (96 pairs x 4 heads x 150 x 150 float32, a MINUTE localizer batch's
   video layer): torch's dropout, the hashed masks' compiled loop, and the physical floor measured beside them,
   one pass that reads and writes the tensor (``x * c``), on one thread.
2. Whole epochs at the experiments' settings (configs/minute/converge.yaml and configs/xml/converge.yaml: one
   thread, freshly initialised models, so the seconds do not depend on weights): MINUTE's retriever epoch, its
   first localizer epoch (the negative pool mined before the clock starts) and XML's epoch. The two kinds of
   masks take turns, round by round; each epoch's median over the rounds is reported.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402

from momentsearch.api.training import load_train_config  # noqa: E402
from momentsearch.device import torch_settings  # noqa: E402
from momentsearch.models import dropout as D  # noqa: E402
from momentsearch.models.family import Step  # noqa: E402
from momentsearch.training.trainer import Trainer  # noqa: E402

SHAPE = (96, 4, 150, 150)


def op_rows(repeat: int) -> list[dict[str, object]]:
    torch.set_num_threads(1)
    x = torch.randn(*SHAPE)
    gb = 2 * x.numel() * 4 / 1e9  # read and write

    def best(fn: object) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - t)
        return min(times)

    rows = []
    for name, fn in [("torch.dropout", lambda: torch.dropout(x, 0.1, True)),
                     ("hashed (compiled loop)", lambda: D.hashed_dropout(x, 0.1)),
                     ("floor: one pass x * c", lambda: x * 1.1)]:
        s = best(fn)
        rows.append({"what": name, "ms": round(s * 1e3, 2), "GB/s": round(gb / s, 1)})
    return rows


def trainer(bench: Path, yaml: str, out: Path, masks: str, epochs: int, model: dict[str, object]) -> Trainer:
    return Trainer(load_train_config(yaml, {"dataset": {"benchmark": str(bench)}, "out_dir": str(out),
                                            "epochs": epochs, "dropout_masks": masks, "model": model}), progress=False)


def epoch_seconds(bench: Path, masks: str, tmp: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    m = trainer(bench, "configs/minute/converge.yaml", tmp / f"minute_{masks}", masks, 2, {"retriever_epochs": 1})
    with torch_settings(m.cfg.num_threads, m.cfg.deterministic, m.device):
        out["MINUTE retriever epoch"] = m.train_epoch(0)["train_seconds"]
        m.family.prepare_epoch(m.model, m.train_data, Step(1, torch.Generator()), m.device)  # the pool, off the clock
        out["MINUTE localizer epoch"] = m.train_epoch(1)["train_seconds"]
    x = trainer(bench, "configs/xml/converge.yaml", tmp / f"xml_{masks}", masks, 1, {})
    with torch_settings(x.cfg.num_threads, x.cfg.deterministic, x.device):
        out["XML epoch"] = x.train_epoch(0)["train_seconds"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, required=True, help="a generated benchmark (the converge preset)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not D.compiled():
        sys.exit("the compiled loop is not built: pip install . (or python setup.py build_ext --inplace)")
    ops = op_rows(repeat=7)
    runs: dict[str, list[dict[str, float]]] = {"torch": [], "hashed": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for masks in (("torch", "hashed") if r % 2 == 0 else ("hashed", "torch")):
                runs[masks].append(epoch_seconds(args.benchmark, masks, Path(tmp) / f"{r}"))
                print(f"round {r + 1} {masks}: {runs[masks][-1]}", flush=True)
    rows = []
    for what in runs["torch"][0]:
        a = statistics.median(x[what] for x in runs["torch"])
        b = statistics.median(x[what] for x in runs["hashed"])
        rows.append({"what": what, "torch masks s": round(a, 2), "hashed masks s": round(b, 2),
                     "speed-up": round(a / b, 2)})
    for r in ops:
        print(f"{r['what']}: {r['ms']} ms, {r['GB/s']} GB/s")
    report("dropout_masks", rows, " ".join(sys.argv), args.json, {"op": ops, "rounds": runs})


if __name__ == "__main__":
    main()
