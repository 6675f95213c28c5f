"""Each class of malformed input that escaped as a foreign exception before issue 24, closed at its root:
the project's error, naming the file (and the dataset, array, field or line)."""

from __future__ import annotations

import dataclasses
import enum
import io
import json
from pathlib import Path
from typing import Literal

import h5py
import numpy as np
import pytest
import torch

from momentsearch.config import from_dict, read_yaml
from momentsearch.data.feature_writers import write_features, write_npy_features
from momentsearch.data.features import NpyDirFeatures, open_features
from momentsearch.data.loaders import load_activitynet, load_jsonl_corpus
from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import (
    AnnotationError,
    CheckpointError,
    ConfigError,
    FeatureError,
    QueryError,
    RelevanceTableError,
    SearchIndexError,
)
from momentsearch.search.index import VideoIndex
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.text.query_file import read_query_file

GOOD = np.arange(24, dtype=np.float32).reshape(3, 8) / 10


def _read_all(path: Path) -> None:
    store = open_features(path)
    _ = store.dim
    for k in store.keys():
        store[k]


# ---- HDF5: attributes and first datasets not what the reader assumed --------------------------------

@pytest.mark.parametrize("dim", ["8", -1, 0, 2**40, 8.5, np.array([8, 8])])
def test_hdf5_dim_attribute_of_the_wrong_kind(tmp_path: Path, dim: object) -> None:
    f = tmp_path / "v.h5"
    write_features(f, {"a": GOOD})
    with h5py.File(f, "a") as h:
        h.attrs["dim"] = dim
    with pytest.raises(FeatureError, match=r"v\.h5: attribute 'dim' must be an integer"):
        _read_all(f)


@pytest.mark.parametrize("first,match", [
    ("group", r"\[0\]: is a Group"), ("scalar", r"shape \(\)"), ("strings", r"holds object values"),
    ("dangling", r"\[0\]: cannot open \(KeyError"), ("external", r"\[0\]: cannot open"),
    ("compound", r"expected numbers"), ("huge", r"larger than one video's features can be"),
])
def test_hdf5_first_dataset_not_features(tmp_path: Path, first: str, match: str) -> None:
    f = tmp_path / "v.h5"
    with h5py.File(f, "w") as h:  # no 'dim' attribute: the first dataset says the dim
        if first == "group":
            h.create_group("0")
        elif first == "scalar":
            h["0"] = 3.0
        elif first == "strings":
            h["0"] = np.array(["a", "b"], dtype=h5py.string_dtype())
        elif first == "dangling":
            h["0"] = h5py.SoftLink("/nowhere")
        elif first == "external":
            h["0"] = h5py.ExternalLink("missing.h5", "/x")
        elif first == "compound":
            h["0"] = np.zeros(3, dtype=[("a", "f4"), ("b", "i4")])
        else:
            h.create_dataset("0", shape=(10**7, 10**4), dtype="f4")  # declared, never written
        h["a"] = GOOD
    with pytest.raises(FeatureError, match=match):
        _read_all(f)


def test_hdf5_checksum_attribute_not_a_number(tmp_path: Path) -> None:
    f = tmp_path / "v.h5"
    write_features(f, {"a": GOOD})
    with h5py.File(f, "a") as h:
        h["a"].attrs["crc32"] = "abc"
    with pytest.raises(FeatureError, match=r"\[a\]: attribute 'crc32' must be an integer"):
        _read_all(f)


# ---- .npy: empty, broken header, wrong kind or shape -------------------------------------------------

def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _broken_header(text: str) -> bytes:
    raw = _npy(GOOD)
    hlen = int.from_bytes(raw[8:10], "little")
    h = text.encode("latin1")
    h += b" " * ((-(10 + len(h) + 1)) % 64) + b"\n"
    return raw[:8] + len(h).to_bytes(2, "little") + h + raw[10 + hlen:]


@pytest.mark.parametrize("content,match", [
    (b"", r"a\.npy: corrupt or not a \.npy file \(EOFError"),
    (b"\x93NUMPY\x01\x00", r"corrupt or not a \.npy file"),
    (_broken_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8)"), r"corrupt or not a \.npy file"),
    (_broken_header("{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((, }"), r"corrupt or not a \.npy"),
    (_broken_header("{'descr': '<f4', 'fortran_order': False, 'shape': (10**12, 8), }"), r"corrupt or not a \.npy"),
    (_broken_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, " + "9" * 5000 + "), }"), r"corrupt"),
    (_npy(np.full((3, 8), "ab")), r"a\.npy: holds <U2 values, expected floats"),
    (_npy(np.zeros((3, 8), dtype=[("a", "f4")])), r"holds \[\('a', '<f4'\)\] values"),
    (_npy(np.float32(1.0)), r"expected a 2-D array \(clips, dim\), got shape \(\)"),
    (_npy(GOOD[0]), r"expected a 2-D array \(clips, dim\), got shape \(8,\)"),
    (_npy(np.zeros((0, 8), np.float32)), r"has zero clips"),
    (_npy(GOOD.astype(np.complex64)), r"holds complex64 values"),
])
def test_npy_feature_file_that_is_not_one(tmp_path: Path, content: bytes, match: str) -> None:
    write_npy_features(tmp_path / "f", {"a": GOOD, "b": GOOD})
    (tmp_path / "f" / "checksums.json").unlink()  # the file's own faults, not a checksum mismatch
    (tmp_path / "f" / "a.npy").write_bytes(content)
    with pytest.raises(FeatureError, match=match):
        NpyDirFeatures(tmp_path / "f")["a"]


def test_npz_under_an_npy_name_and_checksums_of_the_wrong_kind(tmp_path: Path) -> None:
    write_npy_features(tmp_path / "f", {"a": GOOD})
    buf = io.BytesIO()
    np.savez(buf, a=GOOD)
    (tmp_path / "f" / "a.npy").write_bytes(buf.getvalue())
    with pytest.raises(FeatureError, match=r"an \.npz archive\?"):
        NpyDirFeatures(tmp_path / "f")["a"]
    write_npy_features(tmp_path / "g", {"a": GOOD})
    (tmp_path / "g" / "checksums.json").write_text('{"a": Infinity}')
    with pytest.raises(FeatureError, match=r"checksums.json \[a\]: attribute 'crc32' must be an integer"):
        NpyDirFeatures(tmp_path / "g")["a"]


# ---- JSON: an integer of thousands of digits --------------------------------------------------------

def test_integer_past_pythons_digit_limit_in_json_and_jsonl(tmp_path: Path) -> None:
    big = "1" + "0" * 5000
    f = tmp_path / "activitynet_val.json"
    f.write_text('{"v_a": {"duration": ' + big + ', "timestamps": [[1, 5]], "sentences": ["a man runs"]}}')
    with pytest.raises(AnnotationError, match=r"activitynet_val\.json.*a number JSON cannot hold here"):
        load_activitynet(f)
    g = tmp_path / "c.jsonl"
    g.write_text(json.dumps({"record": "header", "format": "momentsearch-corpus", "version": 1, "name": "t"}) + "\n"
                 + '{"record": "video", "video_id": "v1", "duration": ' + big + "}\n")
    with pytest.raises(AnnotationError, match=r"c\.jsonl:2: a number JSON cannot hold here"):
        load_jsonl_corpus(g)


# ---- checkpoints -------------------------------------------------------------------------------------

def test_a_file_that_is_not_a_checkpoint_says_what_it_is(tmp_path: Path) -> None:
    cases = {"text.pt": b"epoch 3, loss 0.2\n", "empty.pt": b"", "array.pt": _npy(GOOD)}
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
    torch.save([1, 2, 3], tmp_path / "list.pt")
    torch.save({"format": "momentsearch-checkpoint", "format_version": torch.zeros(2)}, tmp_path / "tensor.pt")
    expect = {"text.pt": "it is a text file", "empty.pt": "the file is empty", "array.pt": "a NumPy .npy array",
              "list.pt": "not a momentsearch checkpoint", "tensor.pt": "checkpoint format tensor"}
    for name, what in expect.items():
        with pytest.raises(CheckpointError, match=rf"{name}: .*{what}"):
            load_checkpoint(tmp_path / name)


def test_truncated_checkpoint_and_weights_of_the_wrong_kind(tmp_path: Path) -> None:
    from test_index_folder import packed_xml

    ck = packed_xml(tmp_path / "m.pt", {"name": "builtin"})
    raw = ck.read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.pt: not a readable momentsearch checkpoint .*truncated or damaged"):
        load_checkpoint(tmp_path / "cut.pt")
    state = torch.load(ck, weights_only=True)
    name = next(iter(state["model"]))
    state["model"][name] = "weights"
    torch.save(state, tmp_path / "str.pt")
    with pytest.raises(CheckpointError, match=rf"weight '{name}' is a str, not a tensor"):
        load_checkpoint(tmp_path / "str.pt")
    state["model"][name] = torch.full((2,), float("nan"))
    torch.save(state, tmp_path / "nan.pt")
    with pytest.raises(CheckpointError, match="holds NaN or inf"):
        load_checkpoint(tmp_path / "nan.pt")
    state = torch.load(ck, weights_only=True)
    state["model_config"]["init_std"] = -1.0
    torch.save(state, tmp_path / "std.pt")
    with pytest.raises(CheckpointError, match=r"std\.pt: its model config does not load: .*init_std"):
        load_checkpoint(tmp_path / "std.pt")


# ---- configs -----------------------------------------------------------------------------------------

class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


@dataclasses.dataclass
class Typed:
    layer: Literal["attention", "transformer"] = "attention"
    out: Path = Path("runs")
    mode: Mode = Mode.FAST
    lr: float = 1e-3
    epochs: int = 3


@pytest.mark.parametrize("data,match", [
    ({"layer": "conv"}, r"cfg\.layer: must be one of \['attention', 'transformer'\], got 'conv'"),
    ({"layer": True}, r"cfg\.layer: must be one of"),
    ({"out": 5}, r"cfg\.out: expected a path"), ({"out": ""}, r"cfg\.out: expected a path"),
    ({"mode": "medium"}, r"cfg\.mode: must be one of \['fast', 'slow'\]"),
    ({"lr": float("nan")}, r"cfg\.lr: expected a finite number"), ({"lr": 10**400}, r"cfg\.lr: expected a finite"),
    ({"epochs": 10**30}, r"cfg\.epochs: .* beyond a 64-bit integer"), ({"epochs": 10**5000}, r"cfg\.epochs: "),
])
def test_typed_config_fields_are_checked(data: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        from_dict(Typed, data, "cfg")
    ok = from_dict(Typed, {"layer": "transformer", "out": "x/y", "mode": "slow"}, "cfg")
    assert ok.out == Path("x/y") and ok.mode is Mode.SLOW


def test_config_out_of_range_huge_and_alias_bombs(tmp_path: Path) -> None:
    from momentsearch.api.training import load_train_config

    base = "dataset: {benchmark: b}\nmodel: {name: xml, hidden: 0}\n"
    (tmp_path / "a.yaml").write_text(base)
    with pytest.raises(ConfigError, match=r"a\.yaml: .*model\.hidden: must lie in \[1, 8192\], got 0"):
        load_train_config(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text(base.replace("hidden: 0", "dropout: 1.5"))
    with pytest.raises(ConfigError, match=r"model\.dropout: must lie in \[0, 1\)"):
        load_train_config(tmp_path / "b.yaml")
    (tmp_path / "c.yaml").write_text("".join(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i else "1"] * 9) + "]\n"
                                             for i in range(12)))
    with pytest.raises(ConfigError, match=r"c\.yaml: the document expands to more than 100,000 values"):
        read_yaml(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("pad: '" + "x" * 2_000_000 + "'\n")
    with pytest.raises(ConfigError, match=r"d\.yaml: 2,000,008 bytes, larger than a config can be"):
        read_yaml(tmp_path / "d.yaml")
    (tmp_path / "e.yaml").write_bytes(b"epochs: \xff\n")
    with pytest.raises(ConfigError, match=r"e\.yaml:1: not valid UTF-8"):
        read_yaml(tmp_path / "e.yaml")


# ---- index folders: arrays that disagree with the manifest -------------------------------------------

def _index(tmp_path: Path) -> Path:
    idx = VideoIndex(["a", "b"], np.array([4.0, 6.0]), np.array([1.0, 2.0]), np.array([0, 4, 7]),
                     {"h": np.ones((7, 5), np.float16)}, {"v": np.ones((2, 3), np.float32)}, {"family": "xml"})
    return idx.save(tmp_path / "index")


@pytest.mark.parametrize("fault,match", [
    ("short", r"clip\.h\.npy: 6 rows where 7 are expected"),
    ("dtype", r"clip\.h\.npy: dtype float32, the manifest says float16"),
    ("shape", r"clip\.h\.npy: rows of shape \[4\], the manifest says \[5\]"),
    ("missing", r"video\.v\.npy: missing"),
    ("offsets", r"offsets must start at 0, grow by at least one clip per video and end at n_clips"),
    ("float_offsets", r"offsets\.npy: holds float64 values, expected integers"),
    ("ids", r"n_videos must equal len\(video_ids\)"),
    ("name", r"arrays must map array names"),
])
def test_index_folder_that_disagrees_with_its_manifest_is_refused(tmp_path: Path, fault: str, match: str) -> None:
    f = _index(tmp_path)
    man = json.loads((f / "manifest.json").read_text())
    if fault == "short":
        np.save(f / "clip.h.npy", np.ones((6, 5), np.float16))
    elif fault == "dtype":
        np.save(f / "clip.h.npy", np.ones((7, 5), np.float32))
    elif fault == "shape":
        np.save(f / "clip.h.npy", np.ones((7, 4), np.float16))
    elif fault == "missing":
        (f / "video.v.npy").unlink()
    elif fault == "offsets":
        np.save(f / "offsets.npy", np.array([0, 5, 7]) * np.array([1, 1, 2]))
    elif fault == "float_offsets":
        np.save(f / "offsets.npy", np.array([0.0, 4.0, 7.0]))
    elif fault == "ids":
        man["video_ids"] = ["a"]
    else:
        man["arrays"] = {"../h": [5]}
    (f / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(SearchIndexError, match=match):
        VideoIndex.load(f)


# ---- relevance tables, query files -------------------------------------------------------------------

def test_relevance_table_of_the_wrong_kind(tmp_path: Path) -> None:
    rel = MomentRelevance.from_rows(["q1"], ["v1"], [[(0, 1.0, 4.0, 1.0)]])
    rel.save(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for key, bad, match in [("value", np.array([2.0], np.float32), r"values must lie in \(0, 1\]"),
                            ("video_idx", np.array([1.5]), r"\[video_idx\]: holds float64 values"),
                            ("start", np.array([-1.0]), "starts before 0 s"),
                            ("indptr", np.array([0, 2]), "indptr ends at 2 but the table has 1 entries")]:
        np.savez(tmp_path / "bad.npz", **{**arrays, key: bad})
        with pytest.raises(RelevanceTableError, match=rf"bad\.npz.*{match}"):
            MomentRelevance.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "bad.npz", **{k: a for k, a in arrays.items() if k != "end"})
    with pytest.raises(RelevanceTableError, match=r"bad\.npz: no array 'end'"):
        MomentRelevance.load(tmp_path / "bad.npz")
    (tmp_path / "t.npz").write_text("not a zip")
    with pytest.raises(RelevanceTableError, match=r"t\.npz: corrupt or not an \.npz archive"):
        MomentRelevance.load(tmp_path / "t.npz")


def test_query_file(tmp_path: Path) -> None:
    f = tmp_path / "q.txt"
    f.write_text("\ufeffa red door\n\n  someone waves \n")
    assert read_query_file(f) == ["a red door", "someone waves"]
    for raw, match in [(b"ok\n\xff\n", r"q\.txt:2: not valid UTF-8"), (b"ok\nx\x00y\n", r"q\.txt:2: a NUL"),
                       (b"x" * 1001, r"q\.txt:1: a query of 1,001 characters"), (b"\n \n", "no queries")]:
        f.write_bytes(raw)
        with pytest.raises(QueryError, match=match):
            read_query_file(f)
