"""Structure-aware mutants of the binary and YAML files the fuzz run's targets read (``fuzz_targets.py``):
feature stores (HDF5, ``.npy`` and their checksums), YAML configs, an index folder's arrays and manifest, the
``scan`` stage, relevance tables (``.npz``) and checkpoints. Each writes one mutant over its file in a fixture
folder and returns the mutation's name; the byte, text and JSON-tree mutations they build on are in
``fuzz_mutations.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from benchmarks.fuzz_mutations import _mutate_obj, mutate, mutate_h5, mutate_npy, npy_bytes

# the feature matrix every fixture's feature store holds (``fuzz_targets.fixtures`` writes it)
GOOD = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)


def _h5_mutant(folder: Path, rng: random.Random) -> str:
    return mutate_h5(folder / "visual.h5", {"v1": GOOD, "v2": GOOD[:3] * 2},
                     {"dim": 8, "clip_length": 1.5, "format": "momentsearch-features"}, rng)


def _npy_mutant(folder: Path, rng: random.Random) -> str:
    if rng.random() < 0.15:  # the checksums file instead
        sums = folder / "npy/checksums.json"
        sums.write_bytes(mutate(sums.read_bytes(), rng)[0])
        return "checksums"
    raw, how = mutate_npy(GOOD, rng)
    (folder / "npy/v1.npy").write_bytes(raw)
    return how


def _yaml_mutant(folder: Path, rng: random.Random) -> str:
    import yaml

    src = rng.choice(sorted(folder.glob("config_*.yaml")))
    text = src.read_text()
    kind = rng.choice(["tree", "tree", "tree", "text", "aliases", "tag", "big"])
    if kind == "tree":
        data = yaml.safe_load(text)
        for _ in range(rng.randint(1, 3)):
            data = _mutate_obj(data, rng, yaml_values=True)
        try:
            out = yaml.safe_dump(data, allow_unicode=False)
        except (yaml.YAMLError, ValueError):  # a value yaml cannot write: mutate the text instead
            out, kind = mutate(text.encode(), rng)[0].decode("utf-8", "surrogateescape"), "text"
    elif kind == "text":
        out = mutate(text.encode(), rng)[0].decode("utf-8", "surrogateescape")
    elif kind == "aliases":
        out = text + "".join(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i else "1"] * 9) + "]\n" for i in range(12))
    elif kind == "tag":
        out = text + rng.choice(["epochs: !!python/object/apply:os.system ['true']\n", "lr: !!float nan\n",
                                 "seed: !!binary aGVsbG8=\n", "seed: 2026-11-24\n", "model: !!set {a: null}\n"])
    else:
        out = text + "pad: '" + "x" * rng.choice([10_000, 2_000_000]) + "'\n"
    (folder / "config.yaml").write_bytes(out.encode("utf-8", "surrogateescape"))
    return f"{src.stem}:{kind}"


def _index_mutant(folder: Path, rng: random.Random) -> str:
    arrays = folder / "served/index/arrays"
    files = sorted(arrays.glob("*.npy"))
    op = rng.choice(["manifest", "npy", "npy", "npy", "delete", "index_json"])
    if op == "manifest":
        f = arrays / "manifest.json"
        f.write_bytes(mutate(f.read_bytes(), rng)[0])
        return op
    if op == "index_json":
        f = folder / "served/index/index.json"
        f.write_bytes(mutate(f.read_bytes(), rng)[0])
        return op
    f = rng.choice(files)
    if op == "delete":
        f.unlink()
        return f"delete {f.name}"
    good = np.load(f)
    if good.ndim == 2 and good.shape[0] > 0:
        raw, how = mutate_npy(good, rng)
    else:  # offsets, durations, clip lengths: 1-D
        a = rng.choice([good[:-1], np.concatenate([good, good[-1:]]), good.astype("U8"), good[None], good * -1,
                        good.astype(np.float16), np.full_like(good, 2**40) if good.dtype.kind == "i" else good * np.nan,
                        good[::-1].copy(), np.zeros(0, good.dtype)])
        raw, how = npy_bytes(a), "array"
    f.write_bytes(raw)
    return f"{f.name}:{how}"


def _scan_mutant(folder: Path, rng: random.Random, prefix: str = "scan_") -> str:
    (stage,) = (folder / "scan/stage").glob(prefix + "*")
    op = rng.choice(["manifest", "npy", "npy", "npy", "delete"])
    if op == "manifest":
        f = stage / "manifest.json"
        f.write_bytes(mutate(f.read_bytes(), rng)[0])
        return op
    f = rng.choice(sorted(stage.glob("*.npy")))
    if op == "delete":
        f.unlink()
        return f"delete {f.name}"
    raw, how = mutate_npy(np.load(f), rng)
    f.write_bytes(raw)
    return f"{f.name}:{how}"


def _rows8_mutant(folder: Path, rng: random.Random) -> str:
    """The scan stage's int8 tier (``rows8_*``: manifest.json, rows.npy, mult.npy), mutated as the stage is."""
    return _scan_mutant(folder, rng, "rows8_")


def _npz_mutant(folder: Path, rng: random.Random) -> str:
    import io
    import zipfile

    f = folder / "relevance.npz"
    if rng.random() < 0.2:
        f.write_bytes(mutate(f.read_bytes(), rng)[0])
        return "bytes"
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    key = rng.choice(sorted(arrays))
    op = rng.choice(["drop", "value", "value", "header"])
    if op == "drop":
        del arrays[key]
    elif op == "value":
        a = arrays[key]
        if a.dtype.kind == "U":
            choices = [a[:-1], np.concatenate([a, a]), a[None], np.zeros(len(a)), np.array([], "U1"),
                       np.array(["", *a[1:]]), np.array(["\x00" * 3] * len(a)), np.array([a[0]] * len(a))]
        else:
            choices = [a[:-1], np.concatenate([a, a[-1:]]), a[None], a.astype("U4"), -np.abs(a) - 1,
                       a * np.nan if a.dtype.kind == "f" else a + 2**40, a[::-1].copy(), np.zeros(0, a.dtype),
                       np.zeros((len(a), 2)), np.array(1.5), np.full(len(a), 7, a.dtype), a.astype(np.float16)]
        arrays[key] = rng.choice(choices)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for k, a in arrays.items():
            raw = mutate_npy(a, rng)[0] if op == "header" and k == key else npy_bytes(a)
            zf.writestr(k + ".npy", raw)
    f.write_bytes(buf.getvalue())
    return f"{key}:{op}"


def _checkpoint_mutant(folder: Path, rng: random.Random) -> str:
    import torch

    f = folder / "served/index/model.pt"
    op = rng.choice(["bytes", "tree", "tree", "tree", "other"])
    if op == "bytes":
        f.write_bytes(mutate(f.read_bytes(), rng)[0])
        return op
    if op == "other":
        choice = rng.choice(["text", "list", "tensor", "npy", "empty_dict", "pickle_class"])
        if choice == "text":
            f.write_text("this is not a checkpoint\n")
        elif choice == "npy":
            f.write_bytes(npy_bytes(GOOD))
        elif choice == "pickle_class":
            import pickle

            f.write_bytes(pickle.dumps(random.Random(1)))
        else:
            torch.save({"list": [1, 2], "tensor": torch.zeros(3), "empty_dict": {}}[choice], f)
        return choice
    state = torch.load(f, weights_only=True)
    state = _mutate_obj(state, rng, tensors=True)
    torch.save(state, f)
    return op
