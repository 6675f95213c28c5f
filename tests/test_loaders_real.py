"""Every real annotation file in ../shared/data loads with the counts SOURCES.md documents."""

from __future__ import annotations

import pytest
from tests.conftest import shared

from momentsearch.data.loaders import detect_format, load_corpus, load_jsonl_corpus, write_jsonl_corpus

# file, format, #queries, #videos (referenced by queries; TVR: the split's corpus)
REAL = [
    ("tvr/tvr_val_release.jsonl", "tvr", 10_895, 2_179),
    ("tvr/tvr_test_public_release.jsonl", "tvr", 5_445, 1_089),
    ("charades_sta/charades_sta_train.txt", "charades-sta", 12_408, 5_338),
    ("charades_sta/charades_sta_test.txt", "charades-sta", 3_720, 1_334),
    ("didemo/val_data.json", "didemo", 4_180, 1_094),
    ("didemo/test_data.json", "didemo", 4_021, 1_037),
    ("activitynet_captions/train.json", "activitynet", 37_421, 10_009),
    ("activitynet_captions/val.json", "activitynet", 17_505, 4_917),
    ("activitynet_captions/test.json", "activitynet", 17_031, 4_885),
    ("tacos/train.json", "tacos", 9_790, 75),
    ("tacos/val.json", "tacos", 4_436, 27),
    ("tacos/test.json", "tacos", 4_001, 25),
]


@pytest.mark.parametrize("rel,fmt,n_queries,n_videos", REAL, ids=[r[0] for r in REAL])
def test_real_file_counts(rel: str, fmt: str, n_queries: int, n_videos: int) -> None:
    path = shared(rel)
    assert detect_format(path) == fmt
    corpus = load_corpus(path)
    assert len(corpus) == n_queries
    assert len(corpus.videos) == n_videos
    for m in corpus.moments:
        for st, ed in m.spans:
            assert 0 <= st <= ed <= corpus.videos[m.video_id].duration + 1e-9


@pytest.mark.parametrize("rel,fmt,n_queries,n_videos", REAL, ids=[r[0] for r in REAL])
def test_real_file_round_trips_through_jsonl(rel: str, fmt: str, n_queries: int, n_videos: int, tmp_path) -> None:
    corpus = load_corpus(shared(rel))
    out = write_jsonl_corpus(corpus, tmp_path / "c.jsonl")
    back = load_jsonl_corpus(out)
    assert back.videos == corpus.videos
    assert back.moments == corpus.moments
    assert back.name == corpus.name


def test_tvr_fields_types_and_splits() -> None:
    c = load_corpus(shared("tvr/tvr_val_release.jsonl"))
    m = next(m for m in c.moments if m.query_id == "90200")
    assert (m.text, m.video_id, m.spans, m.query_type) == (
        "Phoebe puts one of her ponytails in her mouth.", "friends_s01e03_seg02_clip_19", ((16.48, 33.87),), "v")
    assert c.videos["friends_s01e03_seg02_clip_19"].duration == 61.46
    assert c.videos["friends_s01e03_seg02_clip_19"].clip_length == 1.5
    assert c.stats()["query_types"] == {"v": 8097, "t": 964, "vt": 1834}
    assert c.splits == ["val"]
    test = load_corpus(shared("tvr/tvr_test_public_release.jsonl"))
    assert sum(m.has_ground_truth for m in test.moments) == 0
    assert test.splits == ["test_public"]


def test_charades_quirks_are_corrected_and_kept() -> None:
    c = load_corpus(shared("charades_sta/charades_sta_train.txt"))
    q = c.stats()["quirks"]
    assert q["start_after_end"] == 4
    assert q["end_after_duration"] == 1805
    inverted = [m for m in c.moments if "start_after_end" in m.meta.get("quirks", [])]
    assert {m.video_id for m in inverted} == {"LEOL6", "IOL8Q", "AKKWU"}
    leol6 = next(m for m in inverted if m.video_id == "LEOL6")
    # LEOL6 is 6.25 s long: the inverted span [8.0, 7.0] is ordered, then clamped to the video's end
    assert c.videos["LEOL6"].duration == 6.25
    assert leol6.spans == ((6.25, 6.25),) and leol6.meta["raw_spans"] == [[8.0, 7.0]]
    assert leol6.meta["quirks"] == ["end_after_duration", "start_after_end", "zero_length_span"]
    # zero-length spans are kept and counted (data info reports them): LEOL6 once, AKKWU twice
    zero = [m.video_id for m in c.moments if "zero_length_span" in m.meta.get("quirks", [])]
    assert q["zero_length_span"] == 3 and sorted(zero) == ["AKKWU", "AKKWU", "LEOL6"]
    iol8q = next(m for m in inverted if m.video_id == "IOL8Q")
    assert iol8q.spans == ((12.0, 20.9),)
    first = c.moments[0]
    assert (first.video_id, first.spans, first.text) == ("AO8RW", ((0.0, 6.9),), "a person is putting a book on a shelf.")
    assert c.videos["AO8RW"].meta["scene"]  # from the Charades CSV


def test_didemo_segments_become_seconds_and_all_annotators_kept() -> None:
    c = load_corpus(shared("didemo/val_data.json"))
    m = next(m for m in c.moments if m.query_id == "49152")
    # times [[1, 1], [1, 1], [1, 1], [0, 0]] -> seconds [5, 10] x3 and [0, 5]
    assert m.spans == ((5.0, 10.0), (5.0, 10.0), (5.0, 10.0), (0.0, 5.0))
    assert c.videos[m.video_id].duration == 30.0
    assert c.stats()["spans_per_query"] == {"4": 4165, "7": 15}


def test_activitynet_and_tacos_quirks_and_units() -> None:
    anet = load_corpus(shared("activitynet_captions/train.json"))
    assert anet.stats()["quirks"] == {"end_after_duration": 29, "start_after_end": 2, "zero_length_span": 2}
    assert all(not m.text.startswith(" ") for m in anet.moments)
    tacos = load_corpus(shared("tacos/test.json"))
    v = tacos.videos["s30-d52.avi"]
    assert v.duration == pytest.approx(7346 / 29.4)
    m = next(m for m in tacos.moments if m.video_id == "s30-d52.avi")
    assert m.spans[0] == pytest.approx((141 / 29.4, 354 / 29.4))
    assert m.meta["frames"] == [141, 354]
    assert load_corpus(shared("tacos/train.json")).stats()["quirks"] == {"end_after_duration": 43}
