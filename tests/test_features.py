from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from momentsearch.data.feature_writers import HDF5FeatureWriter, write_features, write_npy_features
from momentsearch.data.features import FeatureStore, HDF5Features, open_features
from momentsearch.errors import FeatureError, MissingFeatureError


def feats(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_hdf5_round_trip_is_fp16_on_disk_and_lazy(tmp_path: Path) -> None:
    data = {"a": feats(5, 8, 1), "b/with/slash": feats(3, 8, 2), "%odd": feats(2, 8, 3)}
    assert write_features(tmp_path / "v.h5", data, attrs={"clip_length": 1.5}) == 3
    with h5py.File(tmp_path / "v.h5", "r") as f:
        assert all(f[k].dtype == np.float16 for k in f)
        assert f.attrs["dim"] == 8 and f.attrs["clip_length"] == 1.5
    src = HDF5Features(tmp_path / "v.h5")
    assert src._file is None  # nothing opened until first use
    assert sorted(src.keys()) == sorted(data)
    for k, v in data.items():
        got = src[k]
        assert got.dtype == np.float32 and got.shape == v.shape
        np.testing.assert_allclose(got, v, rtol=1e-3, atol=1e-3)  # fp16 precision
    assert "a" in src and "zzz" not in src and src.dim == 8


def test_missing_id_suggests_close_ids(tmp_path: Path) -> None:
    write_features(tmp_path / "v.h5", {"video_001": feats(2, 4)})
    store = FeatureStore(tmp_path / "v.h5")
    with pytest.raises(MissingFeatureError, match=r"v.h5: no features for video 'video_01'.*'video_001'"):
        store["video_01"]
    with pytest.raises(MissingFeatureError, match=r"1 video\(s\) have no features, e.g. \['x'\]"):
        store.check_covers(["video_001", "x"])


def test_bad_arrays_are_refused_and_nothing_stored_is_lost(tmp_path: Path) -> None:
    target = tmp_path / "v.h5"
    write_features(target, {"a": feats(2, 4)})
    before = target.read_bytes()
    bad = feats(3, 4)
    bad[1, 2] = np.nan
    with pytest.raises(FeatureError, match=r"\[c\] \(being written\): contains NaN or inf \(first at clip 1\)"):
        write_features(target, {"b": feats(2, 4), "c": bad}, append=True)
    with pytest.raises(FeatureError, match=r"dim 5 does not match the store's dim 4"):
        write_features(target, {"b": feats(2, 5)}, append=True)
    with pytest.raises(FeatureError, match=r"overflow float16"):
        write_features(target, {"b": np.full((2, 4), 1e6)}, append=True)
    with pytest.raises(FeatureError, match=r"expected a 2-D array"):
        write_features(target, {"b": np.zeros(4)}, append=True)
    assert target.read_bytes() == before  # untouched by every failed write
    assert [p.name for p in tmp_path.iterdir()] == ["v.h5"]  # and no temp file left behind


def test_append_keeps_existing_and_refuses_duplicates(tmp_path: Path) -> None:
    target = tmp_path / "v.h5"
    write_features(target, {"a": feats(2, 4)})
    write_features(target, {"b": feats(3, 4)}, append=True)
    assert sorted(HDF5Features(target).keys()) == ["a", "b"]
    with pytest.raises(FeatureError, match="already stored"):
        write_features(target, {"a": feats(2, 4)}, append=True)
    with HDF5FeatureWriter(target, append=True, overwrite_ids=True) as w:
        w.add("a", np.ones((7, 4)))
    assert HDF5Features(target)["a"].shape == (7, 4)


def test_reads_tvr_style_file_without_attrs_and_checks_values(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "tvr.h5", "w") as f:  # as TVR's released files: float32, no attrs
        f["friends_s01e01_seg02_clip_00"] = feats(4, 6)
        f["bad"] = np.array([[0.0, np.inf, 0, 0, 0, 0]], np.float32)
        f["flat"] = np.zeros(6, np.float32)
    src = open_features(tmp_path / "tvr.h5")
    assert src.dim == 6 or src.dim == 1  # dim from the first dataset (h5py orders keys alphabetically)
    src = HDF5Features(tmp_path / "tvr.h5", dim=6)
    assert src["friends_s01e01_seg02_clip_00"].shape == (4, 6)
    with pytest.raises(FeatureError, match=r"tvr.h5 \[bad\]: contains NaN or inf"):
        src["bad"]
    with pytest.raises(FeatureError, match=r"expected a 2-D array"):
        src["flat"]


def test_corrupt_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "junk.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(FeatureError, match=r"junk.h5: cannot open as HDF5"):
        HDF5Features(tmp_path / "junk.h5")["a"]
    with pytest.raises(FeatureError, match=r"feature file not found"):
        HDF5Features(tmp_path / "none.h5")


def test_npy_folder(tmp_path: Path) -> None:
    d = tmp_path / "npy"
    write_npy_features(d, {"a": feats(3, 5), "b": feats(2, 5)})
    (d / "broken.npy").write_bytes(b"garbage")
    src = open_features(d)
    assert sorted(src.keys()) == ["a", "b", "broken"]
    np.testing.assert_allclose(src["a"], feats(3, 5))
    with pytest.raises(FeatureError, match=r"broken.npy: corrupt or not a .npy file"):
        src["broken"]
    with pytest.raises(MissingFeatureError, match="no features for video 'c'"):
        src["c"]


def test_store_with_subtitle_stream(tmp_path: Path) -> None:
    write_features(tmp_path / "v.h5", {"a": feats(3, 8)})
    write_features(tmp_path / "s.h5", {"a": feats(3, 4)})
    with FeatureStore(tmp_path / "v.h5", tmp_path / "s.h5") as store:
        vis, sub = store.get("a")
        assert vis.shape == (3, 8) and sub is not None and sub.shape == (3, 4)
        assert store.has_subtitle


def test_corrupted_feature_bytes_are_caught_by_the_stored_checksums(tmp_path: Path) -> None:
    import h5py

    from momentsearch.data.feature_writers import write_features, write_npy_features
    from momentsearch.data.features import HDF5Features, NpyDirFeatures
    from momentsearch.errors import FeatureError

    rng = np.random.default_rng(0)
    feats = {f"v{i}": rng.normal(size=(20, 16)).astype(np.float32) for i in range(3)}
    h5 = tmp_path / "f.h5"
    write_features(h5, feats)
    with h5py.File(h5, "r") as f:
        offset = f["v1"].id.get_offset()  # where v1's bytes lie in the file
    raw = bytearray(h5.read_bytes())
    raw[offset + 7] ^= 0x10  # one flipped bit, still a finite fp16 number
    h5.write_bytes(bytes(raw))
    store = HDF5Features(h5)
    assert np.allclose(store["v0"], feats["v0"], atol=1e-2)  # the others still read
    with pytest.raises(FeatureError, match=r"f.h5 \[v1\]: checksum mismatch"):
        store["v1"]
    store.close()
    assert HDF5Features(h5, verify=False)["v1"].shape == (20, 16)  # switchable
    folder = tmp_path / "npy"
    write_npy_features(folder, feats)
    p = folder / "v2.npy"
    raw = bytearray(p.read_bytes())
    raw[-5] ^= 0x01
    p.write_bytes(bytes(raw))
    with pytest.raises(FeatureError, match=r"v2.npy: checksum mismatch"):
        NpyDirFeatures(folder)["v2"]
    assert NpyDirFeatures(folder)["v0"].shape == (20, 16)
