"""Mutations for the fuzz run (``fuzz_loaders.py``): bytes and text, JSON trees, and structure-aware
mutations of the binary and YAML files momentsearch reads (HDF5, ``.npy``, ``.npz``, YAML).

Each ``mutate_*`` takes a :class:`random.Random` so that a run is reproducible from its seed, and
returns what it wrote or the mutant together with the mutation's name.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

J = json.dumps

NUMBERS = ["NaN", "Infinity", "-Infinity", "1e309", "-1e309", "-5", "0", "-0", "1e-320", "4.9e-324",
           "9223372036854775808", "18446744073709551616", "1" + "0" * 400, "1" + "0" * 5000, "-1" + "0" * 400, "1e308", "0.0000001",
           '"3"', "true", "null", "[]", "{}"]
STRINGS = ['""', '" "', '"\\ud800"', '"\\udfff x"', '"' + "x" * 200_000 + '"', "0", "null", "[]", "{}", "true",
           '"\\u0000"', '"a\\nb"', '"\\u2028"', "1e309"]
BAD_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xef\xbb\xbf"]


def _json_mutate(text: str, rng: random.Random) -> str | None:
    """Replace a random node of the parsed JSON (or one jsonl line) by a value of another type, or drop a key."""
    lines = text.split("\n")
    if not text.lstrip().startswith(("{", "[")) or text.count("\n") > 1 and all(
            ln.strip().startswith("{") for ln in lines if ln.strip()):
        cand = [i for i, ln in enumerate(lines) if ln.strip()]
        if not cand:
            return None
        i = rng.choice(cand)
        try:
            obj = json.loads(lines[i])
        except (ValueError, RecursionError):
            return None
        lines[i] = J(_mutate_obj(obj, rng))
        return "\n".join(lines)
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return J(_mutate_obj(obj, rng))


YAML_VALUES: list[Any] = ["xml", "minute", "mmn", "none", "auto", "cuda:99", "float('nan')", float("nan"),
                          float("inf"), -1e-9, 10**100, -(10**100), 2**31, 0.5, 1.5, -1, "../..", "/dev/zero", "\x00"]


def _tensor_values() -> list[Any]:
    import torch

    return [torch.zeros(3), torch.zeros(2, 2, dtype=torch.int64), torch.tensor(float("nan")), torch.zeros(0),
            torch.full((4, 4), float("inf")), torch.zeros(1, 1, 1, dtype=torch.bool)]


def _mutate_obj(obj: Any, rng: random.Random, yaml_values: bool = False, tensors: bool = False) -> Any:
    nodes: list[tuple[Any, Any]] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k in list(o):
                nodes.append((o, k))
                walk(o[k])
        elif isinstance(o, list):
            for i in range(len(o)):
                nodes.append((o, i))
                walk(o[i])

    walk(obj)
    if not nodes:
        return rng.choice([None, 1, "x", [], {}])
    parent, key = rng.choice(nodes)
    op = rng.random()
    if op < 0.15 and isinstance(parent, dict):
        del parent[key]
    elif op < 0.25 and isinstance(parent, dict):
        parent[rng.choice(["", "\ud800", "x" * 1000, str(key) + "_"])] = parent[key]
    else:
        extra = (YAML_VALUES if yaml_values else []) + (_tensor_values() if tensors else [])
        parent[key] = rng.choice(extra + [None, True, -1, 0, 2 ** 63, -(2 ** 70), 1e308, -0.0, 5e-324, "", "x", "\ud800",
                                  [], {}, [[]], [1, 2, 3], {"a": 1}, [None, None], [float("nan"), 1.0],
                                  [float("inf"), 1.0], ["1", "2"], [5.0, 1.0], [-5.0, -1.0]])
    return obj


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One random mutation of ``data``; returns the mutant and the mutation's name."""
    kind = rng.choice(["truncate", "bitflip", "insert", "delete", "bad_utf8", "number", "string", "nest", "duplicate",
                       "bom", "crlf", "json_type", "json_type", "json_type", "swap_lines", "empty"])
    n = len(data)
    if kind == "truncate":
        return data[: rng.randrange(n)], kind
    if kind == "bitflip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), kind
    if kind == "insert":
        i = rng.randrange(n + 1)
        return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[i:], kind
    if kind == "delete":
        i = rng.randrange(n)
        return data[:i] + data[i + rng.randint(1, 16):], kind
    if kind == "bad_utf8":
        i = rng.randrange(n + 1)
        return data[:i] + rng.choice(BAD_BYTES) + data[i:], kind
    text = data.decode("utf-8", "surrogateescape")  # earlier mutations may have left invalid UTF-8
    if kind in ("number", "string"):
        pat = r"-?\d+(\.\d+)?([eE][-+]?\d+)?" if kind == "number" else r'"(?:[^"\\]|\\.)*"'
        spots = list(re.finditer(pat, text))
        if not spots:
            return data, kind + "(none)"
        m = rng.choice(spots)
        new = rng.choice(NUMBERS if kind == "number" else STRINGS)
        if text.lstrip()[:1] not in "[{" and kind == "string":  # Charades/CSV: raw text
            new = new.strip('"')
        return (text[: m.start()] + new + text[m.end():]).encode("utf-8", "surrogateescape"), kind
    if kind == "nest":
        depth = rng.choice([100, 1000, 100_000])
        spots = [m.start() for m in re.finditer(r"[\[{:,]", text)] or [0]
        i = rng.choice(spots) + 1
        return (text[:i] + "[" * depth + "1" + "]" * depth + text[i:]).encode("utf-8", "surrogateescape"), kind
    if kind == "duplicate":
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        if text.lstrip().startswith("{") and "\n" not in text.strip():  # one JSON object: repeat its first key
            m = re.match(r'\s*\{("(?:[^"\\]|\\.)*"\s*:\s*(?:\{[^{}]*\}|\[[^\[\]]*\]|[^,{}\[\]]+))', text)
            if m:
                return (text[: m.end()] + "," + m.group(1) + text[m.end():]).encode("utf-8", "surrogateescape"), \
                    "duplicate_key"
        return "\n".join(lines).encode("utf-8", "surrogateescape"), kind
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, kind
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n"), kind
    if kind == "swap_lines":
        lines = text.split("\n")
        rng.shuffle(lines)
        return "\n".join(lines).encode("utf-8", "surrogateescape"), kind
    if kind == "empty":
        return rng.choice([b"", b"\n", b" ", b"{}", b"[]", b"null"]), kind
    out = _json_mutate(text, rng)
    if out is None:
        return data, "json_type(none)"
    return out.encode("utf-8", "surrogateescape"), "json_type"


# ---- structure-aware mutations of binary files -------------------------------------------------

def _np() -> Any:
    import numpy as np

    return np


def wrong_arrays(rng: random.Random, good: Any) -> list[tuple[str, Any]]:
    """Arrays a feature or index file could hold instead of ``good`` (clips, dim) floats."""
    np = _np()
    good = good if good.dtype.kind in "fiub" else np.zeros(good.shape, np.float32)
    good = good if good.ndim == 2 else good.reshape(len(good), -1)
    n, d = good.shape
    return [
        ("empty_rows", np.zeros((0, d), np.float32)), ("zero_dim", np.zeros((n, 0), np.float32)),
        ("1d", good[0]), ("3d", good[None]), ("0d", np.float32(1.0)), ("strings", np.full((n, d), "ab")),
        ("bytes", np.full((n, d), b"ab")), ("complex", good.astype(np.complex64)), ("bool", good > 0),
        ("int64_huge", np.full((n, d), 2**62, np.int64)), ("float64_huge", np.full((n, d), 1e300)),
        ("nan", np.full((n, d), np.nan, np.float32)), ("inf", np.full((n, d), -np.inf, np.float32)),
        ("structured", np.zeros(n, dtype=[("a", "f4", (d,))])), ("datetime", np.zeros((n, d), "datetime64[s]")),
        ("timedelta", np.zeros((n, d), "timedelta64[s]")), ("void", np.zeros((n, d), "V4")),
        ("float16", good.astype(np.float16)), ("uint8", (good * 0).astype(np.uint8)),
        ("wrong_dim", np.zeros((n, d + 1), np.float32)), ("fortran", np.asfortranarray(good)),
        ("big_endian", good.astype(">f4")), ("one_row", good[:1]), ("float64", good.astype(np.float64)),
        ("many_rows", np.zeros((rng.randint(n + 1, 4 * n + 4), d), np.float32)),
        ("int32", np.arange(n * d, dtype=np.int32).reshape(n, d)), ("negative_ints", -np.ones((n, d), np.int64)),
    ]


NPY_DESCR = ["'<U4'", "'|O'", "'|V8'", "[('a', '<f4')]", "'>f4'", "'<c8'", "'garbage'", "'<f4'", "'<f8'", "'<i8'",
             "'|b1'", "'<M8[s]'", "3", "None", "''", "'<f4' + 'x'", "'<f" + "9" * 40 + "'"]
NPY_SHAPES = ["()", "(3,)", "(0, 8)", "(3, 8, 2)", "(-1, 8)", "(10**12, 8)", "(1000000000000, 8)", "(2**63, 8)",
              "(9223372036854775807, 8)", "('a', 8)", "(3.5, 8)", "None", "(3, 8)", "(8, 3)", "(1, 8)", "(100, 8)",
              "[3, 8]", "(" + "(" * 200, "(3, " + "9" * 5000 + ")", "(3, 0)"]
NPY_ORDER = ["True", "False", "'x'", "None", "1"]


def npy_bytes(arr: Any) -> bytes:
    import io

    buf = io.BytesIO()
    _np().save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def mutate_npy(good: Any, rng: random.Random) -> tuple[bytes, str]:
    """A .npy file: a wrong array saved properly, a good one with a broken header, or broken bytes."""
    np = _np()
    kind = rng.choice(["array", "array", "header", "header", "header", "bytes", "npz", "pickle", "empty", "version"])
    if kind == "array":
        name, arr = rng.choice(wrong_arrays(rng, good))
        return npy_bytes(arr), "array_" + name
    if kind == "pickle":
        return npy_bytes(np.array([{"a": 1}, None], dtype=object)), kind
    if kind == "npz":
        import io

        buf = io.BytesIO()
        np.savez(buf, a=good)
        return buf.getvalue(), kind
    if kind == "empty":
        return rng.choice([b"", b"\x93NUMPY", b"\x93NUMPY\x01\x00", b"\x93NUMPY\x01\x00\x76\x00"]), kind
    raw = npy_bytes(good)
    hlen = int.from_bytes(raw[8:10], "little")
    header, data = raw[10: 10 + hlen].decode("latin1"), raw[10 + hlen:]
    if kind == "version":
        return raw[:6] + bytes([rng.choice([0, 2, 3, 9, 255]), rng.randrange(256)]) + raw[8:], kind
    if kind == "bytes":
        return mutate(raw, rng)[0], "bytes"
    op = rng.choice(["descr", "shape", "order", "syntax", "keys", "hlen"])
    if op == "descr":
        header = re.sub(r"'descr': [^,]+,", f"'descr': {rng.choice(NPY_DESCR)},", header)
    elif op == "shape":
        header = re.sub(r"'shape': \([^)]*\)", f"'shape': {rng.choice(NPY_SHAPES)}", header)
    elif op == "order":
        header = header.replace("'fortran_order': False", f"'fortran_order': {rng.choice(NPY_ORDER)}")
    elif op == "syntax":
        i = rng.randrange(len(header))
        header = header[:i] + rng.choice(["(", ")", "{", "'", "\\", "\x00", "\xff", "[" * 100, "#", ""]) + \
            header[i + rng.randint(0, 3):]
    elif op == "keys":
        header = rng.choice(["{}", "{'descr': '<f4'}", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8), "
                             "'extra': 1}", "[]", "1", "'x'"])
    if op == "hlen":
        return raw[:8] + rng.randrange(65536).to_bytes(2, "little") + raw[10:], "header_hlen"
    h = header.encode("latin1", "replace")
    h = h.rstrip(b" \n") + b" " * ((-(10 + len(h.rstrip(b" \n")) + 1)) % 64) + b"\n"
    return raw[:8] + len(h).to_bytes(2, "little") + h + data, "header_" + op


H5_ATTR_VALUES: list[Any] = [-1, 0, 7, 2**40, "8", b"8", [8, 8], 8.5, float("nan"), True, 1e300, [], "x" * 1000,
                             -(2**62), 2**32, 2**31]


def mutate_h5(path: Any, arrays: dict[str, Any], attrs: dict[str, Any], rng: random.Random) -> str:
    """Write an HDF5 feature file to ``path`` with 1-3 structural faults (attributes, dataset shapes and
    dtypes, groups, soft / hard / external links, empty files), sometimes with its bytes broken too."""
    import h5py

    from momentsearch.data.features import checksum

    np = _np()
    ops = []
    with h5py.File(path, "w") as f:
        for k, a in arrays.items():
            f.create_dataset(k, data=a)
            f[k].attrs["crc32"] = checksum(a)
        for k, v in attrs.items():
            f.attrs[k] = v
        keys = list(arrays)
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(["attr_dim", "del_dim", "crc", "dataset", "dataset", "group", "soft_link", "soft_self",
                             "external", "hard_link", "first_group", "no_datasets", "scalar", "empty_shape",
                             "compressed", "datatype", "vlen", "attr_dataset_dim"])
            ops.append(op)
            k = rng.choice(keys)
            try:
                if op == "attr_dim":
                    v = rng.choice(H5_ATTR_VALUES)
                    f.attrs["dim"] = np.asarray(v) if isinstance(v, list) else v
                elif op == "del_dim" and "dim" in f.attrs:
                    del f.attrs["dim"]
                elif op == "crc" and k in f:
                    v = rng.choice(H5_ATTR_VALUES)
                    f[k].attrs["crc32"] = np.asarray(v) if isinstance(v, list) else v
                elif op in ("dataset", "scalar", "empty_shape", "compressed", "vlen"):
                    if k in f:
                        del f[k]
                    if op == "dataset":
                        name, a = rng.choice(wrong_arrays(rng, arrays[k]))
                        ops[-1] += "_" + name
                        if a.dtype.kind in "USO":
                            a = a.astype(h5py.string_dtype()) if a.dtype.kind == "U" else a
                        if a.dtype.kind in "Mm":
                            a = a.view(np.int64)
                        f.create_dataset(k, data=a)
                    elif op == "scalar":
                        f.create_dataset(k, data=3.0)
                    elif op == "empty_shape":
                        f.create_dataset(k, data=h5py.Empty("f"))
                    elif op == "compressed":
                        f.create_dataset(k, data=arrays[k], compression="gzip", chunks=True)
                    else:
                        f.create_dataset(k, data=np.array(["a", "bc"], dtype=h5py.string_dtype()))
                elif op == "group":
                    del f[k]
                    g = f.create_group(k)
                    g.create_dataset("x", data=arrays[k])
                elif op == "soft_link":
                    del f[k]
                    f[k] = h5py.SoftLink(rng.choice(["/nowhere", "/" + keys[0], "/"]))
                elif op == "soft_self":
                    del f[k]
                    f[k] = h5py.SoftLink("/" + k)
                elif op == "external":
                    del f[k]
                    f[k] = h5py.ExternalLink(rng.choice(["missing.h5", str(path)]), "/" + keys[0])
                elif op == "hard_link":
                    f[k + "_copy"] = f[keys[0]]
                elif op == "first_group":
                    f.create_group("0000")
                elif op == "no_datasets":
                    for kk in list(f.keys()):
                        del f[kk]
                elif op == "datatype":
                    f["0001"] = np.dtype("f4")
                elif op == "attr_dataset_dim":
                    f.create_dataset("0002", shape=(10**7, 10**4), dtype="f4")  # declared, never written
            except (KeyError, ValueError, TypeError, OSError, RuntimeError):
                ops[-1] += "(skipped)"
    if rng.random() < 0.25:
        raw = open(path, "rb").read()
        raw, how = mutate(raw, rng)
        open(path, "wb").write(raw)
        ops.append("bytes_" + how)
    return "+".join(ops)
