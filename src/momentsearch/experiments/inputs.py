"""What an experiment run was trained on, by content: its benchmark's generated files and the relevance
tables its config names.

A run's folder is named by a hash of its config, which names the benchmark and the tables by path. When the
benchmark is generated again (a changed generator, a deleted folder) or a table recomputed, the same folder
would then hold a run of other data, resumed or reported as if nothing changed. So a run records a digest
of its inputs in ``inputs.json`` when it starts, and :func:`check_inputs` refuses to resume, continue or
report it over inputs whose digest differs. Digests are of contents, not bytes: arrays in NumPy ``.npz``
and HDF5 files are hashed by name, dtype, shape and values (their containers store write times), and of
``benchmark.yaml`` only what generation was asked for (it also stores how long generation took).
Encoder caches (``features/queries_*.h5``, ``*.minilm.h5``) and the tables' ``stats.json`` reports are
derived from the hashed files and are left out. Runs made before this record existed have no
``inputs.json`` and are not checked.
"""

from __future__ import annotations

import glob
import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.fileio import write_json
from momentsearch.readers import read_json_object

INPUTS_FILE = "inputs.json"
# what generation writes and training reads (the charades preset has no concepts.json or subtitle.h5)
BENCHMARK_FILES = ("corpus.jsonl", "concepts.json", "features/visual.h5", "features/subtitle.h5")
SKIPPED_SUFFIXES = (".stats.json", ".minilm.h5")


def _value_bytes(a: Any) -> bytes:
    """An array's values as bytes; strings (object arrays, whose bytes are pointers) by their repr."""
    return a.tobytes() if a.dtype.kind != "O" else repr(a.tolist()).encode()


def _update_array(h: Any, name: str, a: Any) -> None:
    h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
    h.update(_value_bytes(a))


def _digest_h5(path: Path, h: Any) -> None:
    import h5py
    import numpy as np

    with h5py.File(path, "r") as f:
        def visit(name: str, obj: Any) -> None:
            attrs = sorted((k, repr(np.asarray(v).tolist())) for k, v in obj.attrs.items())
            h.update(json.dumps([name, attrs]).encode())
            if isinstance(obj, h5py.Dataset):
                if obj.shape and obj.shape[0] > 0 and obj.ndim >= 1:
                    step = max(1, (1 << 24) // max(1, obj.dtype.itemsize * int(np.prod(obj.shape[1:]) or 1)))
                    h.update(json.dumps([obj.dtype.str, list(obj.shape)]).encode())
                    for i in range(0, obj.shape[0], step):
                        h.update(_value_bytes(np.ascontiguousarray(obj[i:i + step])))
                else:
                    _update_array(h, name, np.asarray(obj[()]))

        visit("/", f)
        f.visititems(visit)


def content_digest(path: Path) -> str:
    """A digest of one file's content (see the module's note on ``.npz``, HDF5 and ``benchmark.yaml``)."""
    h = hashlib.blake2b(digest_size=16)
    if path.name.endswith(".npz"):
        import numpy as np

        with np.load(path, allow_pickle=False) as z:
            for k in sorted(z.files):
                _update_array(h, k, z[k])
    elif path.suffix in (".h5", ".hdf5"):
        _digest_h5(path, h)
    elif path.name == "benchmark.yaml":
        from momentsearch.config import read_yaml

        info = read_yaml(path)
        h.update(json.dumps({k: info.get(k) for k in ("format", "version", "config")}, sort_keys=True).encode())
    else:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=256)
def _cached(path: str, size: int, mtime_ns: int) -> str:
    return content_digest(Path(path))


def _digest(path: Path) -> str:
    st = path.stat()
    return _cached(str(path.resolve()), st.st_size, st.st_mtime_ns)


def _files_digest(files: list[Path], root: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in files:
        h.update(json.dumps([p.relative_to(root).as_posix(), _digest(p)]).encode())
    return h.hexdigest()


def run_inputs(cfg: dict[str, Any]) -> dict[str, str]:
    """The digests of what the run of training config ``cfg`` (a dict, as the runner builds it) trains on:
    ``benchmark`` and each table it names (``table:<option>``)."""
    bench = Path(cfg["dataset"]["benchmark"])
    files = [bench / "benchmark.yaml", *(bench / n for n in BENCHMARK_FILES),
             *sorted((bench / "tvr").glob("*") if (bench / "tvr").is_dir() else [])]
    out = {"benchmark": _files_digest([p for p in files if p.is_file()], bench)}
    model = cfg.get("model", {})
    for option, prefix in (("relevance.table", model.get("relevance", {}).get("table", "")),
                           ("true_negatives_table", model.get("true_negatives_table", ""))):
        if prefix:
            p = Path(prefix)
            if p.is_file():  # a table named by its file (a text proxy's .npz): the files sharing its stem
                p = p.with_suffix("")
            parts = sorted(f for f in p.parent.glob(glob.escape(p.name) + ".*")
                           if f.is_file() and not f.name.endswith(SKIPPED_SUFFIXES))
            if not parts:
                raise ConfigError(f"{option}: no files with the prefix {prefix}")
            out[f"table:{option}"] = _files_digest(parts, p.parent)
    return out


def check_inputs(out_dir: Path, cfg: dict[str, Any], record: bool) -> None:
    """Refuse the run in ``out_dir`` when its ``inputs.json`` differs from what config ``cfg`` reads now
    (:func:`run_inputs`); without one, write it when ``record`` (a run starting from scratch), else leave the
    run unrecorded (made before the record existed: what it was trained on is not known)."""
    path = out_dir / INPUTS_FILE
    if not path.exists():
        if record:
            out_dir.mkdir(parents=True, exist_ok=True)
            write_json(path, run_inputs(cfg))
        return
    stored = read_json_object(path, ConfigError, "record of what the run was trained on")
    bad = next((k for k, v in stored.items() if not isinstance(v, str)), None)
    if bad is not None:
        raise ConfigError(f"{path}: {bad!r} is {type(stored[bad]).__name__}, expected a digest string; the file "
                          "records what the run was trained on (written when the run started)")
    inputs = run_inputs(cfg)
    changed = sorted(k for k in set(stored) | set(inputs) if stored.get(k) != inputs.get(k))
    if changed:
        raise ConfigError(f"{out_dir}: this run was trained on other inputs than the ones it would now read "
                          f"({', '.join(changed)} changed: the benchmark was generated again or a table "
                          "recomputed). Its results stay as they are; to train it on the current inputs, move the "
                          "run folder aside (or use another runs_dir) and run the experiment again")
