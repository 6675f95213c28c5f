"""Training epochs as before and with the two training speed-ups, in one run: torch's dropout masks against hashed
ones (``TrainConfig.dropout_masks``), and MINUTE's batches in one pass against 4 passes by video length
(``MINUTEConfig.length_passes``).

    python benchmarks/training_speed.py --benchmark runs/experiments/benchmarks/converge --rounds 3

1. The op on one tensor of attention weights (96 pairs x 4 heads x 150 x 150 float32, a MINUTE localizer batch's
   video layer): torch's dropout, the hashed masks' compiled loop (plain and vectorised), and the physical floors
   measured beside them, one pass that reads and writes the tensor into fresh or already touched memory, on one
   thread.
2. Whole epochs at the experiments' settings (configs/minute/converge.yaml and configs/xml/converge.yaml: one
   thread, freshly initialised models, so the seconds do not depend on weights): MINUTE's retriever epoch, its
   first localizer epoch (the negative pool mined before the clock starts) and XML's epoch (XML has no
   length_passes: its rows are the masks alone), and one validation of the MINUTE model. The variants (masks,
   passes) take turns round by round, in a rotated order; each epoch's median over the rounds is reported.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report, timed  # noqa: E402
from momentsearch.api.training import load_train_config  # noqa: E402
from momentsearch.device import torch_settings  # noqa: E402
from momentsearch.models import dropout as D  # noqa: E402
from momentsearch.models.family import Step  # noqa: E402
from momentsearch.training.trainer import Trainer  # noqa: E402

SHAPE = (96, 4, 150, 150)


def op_rows(repeat: int) -> list[dict[str, object]]:
    """The op on one tensor, one thread: torch's dropout, the hashed loop on each path this CPU has (the plain loop
    and the vector one), and two floors: one pass over fresh memory (``x * c``, which pays the page faults of a new
    output, as every op of an epoch does) and one into memory already touched (``mul(out=)``: reads and writes the
    same bytes, no faults)."""
    torch.set_num_threads(1)
    x = torch.randn(*SHAPE)
    warm = torch.empty_like(x).fill_(0)
    gb = 2 * x.numel() * 4 / 1e9  # read and write
    fns = [("torch.dropout", "all", lambda: torch.dropout(x, 0.1, True))]  # (row, the loop in force, the op)
    for want in ("none", "all"):
        path = D._ext.set_simd(want)
        fns.append((f"hashed, {path} loop", want, lambda: D.hashed_dropout(x, 0.1)))
        fns.append((f"hashed, {path} loop, into touched memory", want,
                    lambda: D._ext.apply(x.numpy(), warm.numpy(), 0, 5, D.threshold(0.1), 1 / 0.9)))
    fns += [("floor: one pass into fresh memory, x * c", "all", lambda: x * 1.1),
            ("floor: one pass into touched memory, mul(out=)", "all", lambda: torch.mul(x, 1.1, out=warm))]
    rows = []
    try:
        for name, want, fn in fns:
            D._ext.set_simd(want)
            s = timed(fn, repeat)[0]
            rows.append({"what": name, "ms": round(s * 1e3, 2), "GB/s": round(gb / s, 1)})
    finally:
        D._ext.set_simd("all")
    return rows


def trainer(bench: Path, yaml: str, out: Path, masks: str, epochs: int, model: dict[str, object]) -> Trainer:
    return Trainer(load_train_config(yaml, {"dataset": {"benchmark": str(bench)}, "out_dir": str(out),
                                            "epochs": epochs, "dropout_masks": masks, "model": model}), progress=False)


VARIANTS = (("torch", 1), ("hashed", 1), ("hashed", 4))  # (dropout_masks, MINUTE's length_passes)


def load_loop(so: Path) -> Any:
    """Another build of ``models/_dropout.c`` (an earlier commit's, say), loaded beside the one in force."""
    loader = importlib.machinery.ExtensionFileLoader("momentsearch.models._dropout", str(so))
    spec = importlib.util.spec_from_file_location("momentsearch.models._dropout", so, loader=loader)
    if spec is None:
        sys.exit(f"{so}: not a loadable extension module")
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def epoch_seconds(bench: Path, masks: str, passes: int, tmp: Path, loop: Any = None) -> dict[str, float]:
    """One variant's epochs; ``loop``, when given, is the compiled dropout loop its hashed masks run on."""
    if loop is not None:
        built, D._ext = D._ext, loop
        try:
            return epoch_seconds(bench, masks, passes, tmp / "other_loop")
        finally:
            D._ext = built
    out: dict[str, float] = {}
    m = trainer(bench, "configs/minute/converge.yaml", tmp / f"minute_{masks}_{passes}", masks, 2,
                {"retriever_epochs": 1, "length_passes": passes})
    with torch_settings(m.cfg.num_threads, m.cfg.deterministic, m.device):
        out["MINUTE retriever epoch"] = m.train_epoch(0)["train_seconds"]
        m.family.prepare_epoch(m.model, m.train_data, Step(1, torch.Generator()), m.device)  # the pool, off the clock
        out["MINUTE localizer epoch"] = m.train_epoch(1)["train_seconds"]
        t = time.perf_counter()
        m.validate()
        out["MINUTE validation"] = time.perf_counter() - t
    if passes == 1:
        x = trainer(bench, "configs/xml/converge.yaml", tmp / f"xml_{masks}", masks, 1, {})
        with torch_settings(x.cfg.num_threads, x.cfg.deterministic, x.device):
            out["XML epoch"] = x.train_epoch(0)["train_seconds"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, required=True, help="a generated benchmark (the converge preset)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--other-loop", type=Path, default=None,
                    help="another build of models/_dropout.c to time with hashed masks and 4 passes beside this one, "
                         "e.g. an earlier commit's: git show REV:src/momentsearch/models/_dropout.c > /tmp/d.c && "
                         "gcc -shared -fPIC -O3 -std=c11 $(python3-config --includes) /tmp/d.c -o /tmp/d.so")
    args = ap.parse_args()
    if not D.compiled():
        sys.exit("the compiled loop is not built: pip install . (or python setup.py build_ext --inplace)")
    ops = op_rows(repeat=7)
    variants: list[tuple[str, int, Any]] = [(masks, passes, None) for masks, passes in VARIANTS]
    names = [f"{masks} masks, {passes} pass{'es' if passes > 1 else ''}" for masks, passes in VARIANTS]
    if args.other_loop is not None:
        variants.append(("hashed", 4, load_loop(args.other_loop)))
        names.append(f"hashed masks, 4 passes, {args.other_loop.name}")
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i in range(len(variants)):
                j = (i + r) % len(variants)
                masks, passes, loop = variants[j]
                runs[names[j]].append(epoch_seconds(args.benchmark, masks, passes, Path(tmp) / f"{r}_{j}", loop))
                print(f"round {r + 1} {names[j]}: {runs[names[j]][-1]}", flush=True)
    rows = []
    for what in runs[names[0]][0]:
        row: dict[str, object] = {"what": what}
        first = statistics.median(x[what] for x in runs[names[0]])
        for n in names:  # XML has no length_passes: no row of its own there
            row[f"{n} s"] = round(statistics.median(x[what] for x in runs[n]), 2) if what in runs[n][0] else "-"
        fastest = [n for n in names[: len(VARIANTS)] if what in runs[n][0]][-1]
        row["speed-up, last"] = round(first / statistics.median(x[what] for x in runs[fastest]), 2)
        if len(names) > len(VARIANTS):  # the other loop against this one
            row["other loop / this"] = round(statistics.median(x[what] for x in runs[names[-1]])
                                             / statistics.median(x[what] for x in runs[fastest]), 2) \
                if what in runs[names[-1]][0] else "-"
        rows.append(row)
    for r in ops:
        print(f"{r['what']}: {r['ms']} ms, {r['GB/s']} GB/s")
    report("training_speed", rows, " ".join(sys.argv), args.json, {"op": ops, "rounds": runs})


if __name__ == "__main__":
    main()
