"""Malformed input: each error names the file and the line (or record) at fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from momentsearch.data.loaders import (
    detect_format,
    load_activitynet,
    load_charades_sta,
    load_corpus,
    load_didemo,
    load_jsonl_corpus,
    load_tacos,
    load_tvr,
)
from momentsearch.errors import AnnotationError


def write(p: Path, text: str) -> Path:
    p.write_text(text, encoding="utf-8")
    return p


def test_charades_line_without_separator(tmp_path: Path) -> None:
    f = write(tmp_path / "charades_sta_test.txt", "AO8RW 0.0 6.9##a person reads.\nAO8RW 1.0 2.0 a person sits.\n")
    with pytest.raises(AnnotationError, match=r"charades_sta_test.txt:2: expected 'VIDEOID START END##sentence'"):
        load_charades_sta(f)


def test_charades_bad_number_and_empty_sentence(tmp_path: Path) -> None:
    f = write(tmp_path / "a.txt", "AO8RW 0.0 x##a person reads.\n")
    with pytest.raises(AnnotationError, match=r"a.txt:1: START and END must be numbers"):
        load_charades_sta(f)
    f = write(tmp_path / "b.txt", "AO8RW 0.0 1.0## \n")
    with pytest.raises(AnnotationError, match=r"b.txt:1: empty sentence"):
        load_charades_sta(f)
    f = write(tmp_path / "c.txt", "AO8RW nan 1.0##x\n")
    with pytest.raises(AnnotationError, match=r"c.txt:1: START and END must be finite"):
        load_charades_sta(f)


def test_charades_without_csv_estimates_durations(tmp_path: Path) -> None:
    f = write(tmp_path / "x.txt", "V1 1.0 4.0##a\nV1 2.0 9.5##b\n")
    c = load_charades_sta(f)
    assert c.videos["V1"].duration == 9.5
    assert c.videos["V1"].meta == {"duration_estimated_from_annotations": True}


def test_tvr_bad_json_line_and_missing_field(tmp_path: Path) -> None:
    good = {"desc_id": 1, "desc": "x", "vid_name": "v", "duration": 10.0, "ts": [1, 2], "type": "v"}
    f = write(tmp_path / "tvr_val_release.jsonl", json.dumps(good) + "\n{not json\n")
    with pytest.raises(AnnotationError, match=r"tvr_val_release.jsonl:2: invalid JSON"):
        load_tvr(f)
    bad = dict(good, desc_id=2)
    del bad["ts"]
    f = write(tmp_path / "tvr_val_release.jsonl", json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(AnnotationError, match=r":2: missing field 'ts'"):
        load_tvr(f)
    f = write(tmp_path / "tvr_val_release.jsonl", json.dumps(dict(good, ts=[1, "a"])) + "\n")
    with pytest.raises(AnnotationError, match=r":1: span must be \[start, end\]"):
        load_tvr(f)
    f = write(tmp_path / "tvr_val_release.jsonl", json.dumps(dict(good, type="x")) + "\n")
    with pytest.raises(AnnotationError, match=r":1: field 'type' must be one of v, t, vt"):
        load_tvr(f)
    f = write(tmp_path / "tvr_val_release.jsonl", json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(AnnotationError, match=r"duplicate query_id '1'"):
        load_tvr(f)


def test_tvr_subtitles_attach_to_videos(tmp_path: Path) -> None:
    q = {"desc_id": 1, "desc": "x", "vid_name": "v", "duration": 10.0, "ts": [1, 2], "type": "vt"}
    f = write(tmp_path / "tvr_val_release.jsonl", json.dumps(q) + "\n")
    s = write(tmp_path / "subs.jsonl", json.dumps({"vid_name": "v", "sub": [{"start": 0.5, "end": 1.5, "text": "Hi."}]}) + "\n")
    c = load_tvr(f, subtitles=s)
    assert c.videos["v"].subtitles[0].text == "Hi."
    s = write(tmp_path / "subs.jsonl", json.dumps({"vid_name": "v", "sub": [{"start": 0.5, "text": "Hi."}]}) + "\n")
    with pytest.raises(AnnotationError, match=r"subs.jsonl:1: missing field 'end'"):
        load_tvr(f, subtitles=s)


def test_didemo_errors_name_the_record(tmp_path: Path) -> None:
    rec = {"annotation_id": 7, "description": "d", "video": "v.mov", "num_segments": 6, "times": [[0, 9]]}
    f = write(tmp_path / "val_data.json", json.dumps([rec]))
    with pytest.raises(AnnotationError, match=r"val_data.json \(record #0\): segment index out of 0..5"):
        load_didemo(f)
    f = write(tmp_path / "val_data.json", json.dumps([dict(rec, times=[])]))
    with pytest.raises(AnnotationError, match=r"'times' is empty"):
        load_didemo(f)


def test_activitynet_and_tacos_errors_name_video_and_line(tmp_path: Path) -> None:
    data = {"v_a": {"duration": 10.0, "timestamps": [[0, 1]], "sentences": ["x"]},
            "v_b": {"duration": 10.0, "timestamps": [[0, 1], [2, 3]], "sentences": ["x"]}}
    f = write(tmp_path / "train.json", json.dumps(data, indent=1))
    with pytest.raises(AnnotationError, match=r"train.json:\d+ \(record v_b\): 2 timestamps but 1 sentences"):
        load_activitynet(f)
    data = {"s1.avi": {"timestamps": [[0, 10]], "sentences": ["x"], "fps": 0, "num_frames": 100}}
    f = write(tmp_path / "test.json", json.dumps(data))
    with pytest.raises(AnnotationError, match=r"\(record s1.avi\): fps must be > 0"):
        load_tacos(f)


def test_jsonl_errors(tmp_path: Path) -> None:
    f = write(tmp_path / "c.jsonl", '{"record": "video", "video_id": "v", "duration": 5}\n{"record": "clip"}\n')
    with pytest.raises(AnnotationError, match=r"c.jsonl:2: 'record' must be header, video or moment"):
        load_jsonl_corpus(f)
    f = write(tmp_path / "c.jsonl", '{"record": "moment", "query_id": "q", "text": "t", "video_id": "v", "spans": [[3, 1]]}\n')
    with pytest.raises(AnnotationError, match=r"c.jsonl:1: query q: span start 3.0 > end 1.0"):
        load_jsonl_corpus(f)
    f = write(tmp_path / "c.jsonl", '{"record": "moment", "query_id": "q", "text": "t", "video_id": "v", "spans": [[0, 1]]}\n')
    with pytest.raises(AnnotationError, match=r"refers to unknown video 'v'"):
        load_jsonl_corpus(f)


def test_detect_format_errors(tmp_path: Path) -> None:
    with pytest.raises(AnnotationError, match="file not found"):
        load_corpus(tmp_path / "nope.json")
    f = write(tmp_path / "x.csv", "a,b\n")
    with pytest.raises(AnnotationError, match="pass --format"):
        detect_format(f)
    f = write(tmp_path / "tvr_video2dur_idx.json", json.dumps({"test_public": {"v": [1.0, 0]}}))
    with pytest.raises(AnnotationError, match="video2dur file, not a query file"):
        detect_format(f)
    with pytest.raises(AnnotationError, match="has no corpus.jsonl"):
        detect_format(tmp_path)


# one valid file per format (file name, loader, content); the tests below break each the same way
GOOD = {
    "charades_sta_test.txt": (load_charades_sta, "AO8RW 0.0 6.9##a person is putting a book on a shelf.\n"),
    "tvr_val_release.jsonl": (load_tvr, json.dumps({"desc_id": 1, "desc": "he sits", "vid_name": "v", "duration": 10.0,
                                                    "ts": [1.0, 2.0], "type": "v"}) + "\n"),
    "didemo_val.json": (load_didemo, json.dumps([{"annotation_id": 1, "description": "a dog", "video": "v.mp4",
                                                  "times": [[0, 1]] * 4, "num_segments": 6}])),
    "activitynet_val.json": (load_activitynet, json.dumps({"v_a": {"duration": 20.0, "timestamps": [[1.0, 5.0]],
                                                                   "sentences": ["a man runs"]}})),
    "tacos_test.json": (load_tacos, json.dumps({"s13-d21.avi": {"num_frames": 300, "fps": 29.4,
                                                                "timestamps": [[0, 60]], "sentences": ["he cuts"]}})),
}


@pytest.mark.parametrize("name", list(GOOD))
def test_invalid_utf8_names_the_file_and_line_in_every_loader(tmp_path: Path, name: str) -> None:
    loader, text = GOOD[name]
    loader(write(tmp_path / name, text))  # the valid file loads
    bad = tmp_path / ("bad_" + name)
    bad.write_bytes(b"\n" + text.encode().replace(b"a", b"\xff", 1))
    with pytest.raises(AnnotationError, match=r"bad_.*:2: not valid UTF-8: byte 0xff"):
        loader(bad)


@pytest.mark.parametrize("name", [n for n in GOOD if not n.endswith(".txt")])
def test_deep_json_nesting_and_huge_integers_are_the_projects_errors(tmp_path: Path, name: str) -> None:
    loader, _ = GOOD[name]
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(AnnotationError, match="nested too deeply|expected"):
        loader(write(tmp_path / name, deep + ("\n" if name.endswith(".jsonl") else "")))
    huge = json.dumps({"desc_id": 1, "desc": "x", "vid_name": "v", "duration": 10 ** 400, "ts": [1, 2]})
    with pytest.raises(AnnotationError, match="finite number"):
        load_tvr(write(tmp_path / "tvr_test_release.jsonl", huge + "\n"))
    with pytest.raises(AnnotationError, match="two finite numbers"):
        load_activitynet(write(tmp_path / "activitynet_test.json", json.dumps(
            {"v_a": {"duration": 20.0, "timestamps": [[1, 10 ** 400]], "sentences": ["a man runs"]}})))


def test_charades_bom_is_dropped_and_csv_errors_are_the_projects(tmp_path: Path) -> None:
    loader, text = GOOD["charades_sta_test.txt"]
    p = tmp_path / "charades_sta_test.txt"
    p.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert list(loader(p).videos) == ["AO8RW"]  # not "\ufeffAO8RW"
    csv_path = write(tmp_path / "Charades_v1_test.csv", "id,length\nAO8RW,\"" + "x" * 200_000 + "\"\n")
    with pytest.raises(AnnotationError, match=r"Charades_v1_test.csv:\d+: (malformed CSV|'length' is not a number)"):
        loader(p, csv_path)
    csv_path.write_bytes(b"id,length\nAO8RW,3\xff\n")
    with pytest.raises(AnnotationError, match=r"Charades_v1_test.csv:2: not valid UTF-8"):
        loader(p, csv_path)


def test_spans_are_clamped_to_the_video_even_when_wholly_outside() -> None:
    from momentsearch.data.corpus import clean_span

    assert clean_span(-5.0, -1.0, 30.0) == ((0.0, 0.0), True)  # was (-1, -1): a negative span kept
    assert clean_span(-1.0, -5.0, None) == ((0.0, 0.0), True)
    assert clean_span(35.0, 40.0, 30.0) == ((30.0, 30.0), True)
    assert clean_span(8.0, 2.0, 30.0) == ((2.0, 8.0), True)
    assert clean_span(2.0, 8.0, 30.0) == ((2.0, 8.0), False)


def test_error_messages_are_cut_to_a_readable_length(tmp_path: Path) -> None:
    # a huge field echoed by any check stays a readable line
    p = write(tmp_path / "tvr_val_release.jsonl", json.dumps({"desc_id": 1, "desc": "x", "vid_name": "v",
                                                             "duration": "9" * 1_000_000, "ts": [1, 2]}) + "\n")
    with pytest.raises(AnnotationError) as e:
        load_tvr(p)
    text = str(e.value)
    assert len(text) < 1100 and text.endswith("more characters cut]") and text.startswith(f"{p}:1")


@pytest.mark.parametrize("name", ["activitynet_val.json", "tacos_test.json"])
def test_a_video_given_twice_is_an_error_not_a_silent_loss(tmp_path: Path, name: str) -> None:
    loader, text = GOOD[name]
    body = text.strip()[1:-1]  # '"video": {...}'
    p = write(tmp_path / name, "{\n" + body + ",\n" + body + "\n}")
    with pytest.raises(AnnotationError, match=r":3: the key .* appears twice"):
        loader(p)


@pytest.mark.parametrize(("name", "content", "message"), [
    # corpus-model rules, re-raised naming the file
    ("activitynet_val.json", {"v_a": {"duration": -1.0, "timestamps": [[1.0, 2.0]], "sentences": ["a"]}},
     "duration must be a finite number >= 0"),
    ("activitynet_val.json", {"": {"duration": 5.0, "timestamps": [[1.0, 2.0]], "sentences": ["a"]}},
     "non-empty video_id"),
    ("tacos_test.json", {"s1.avi": {"num_frames": 300, "fps": 5e-324, "timestamps": [[0, 60]], "sentences": ["a"]}},
     "not a finite duration"),
    ("tacos_test.json", {"s1.avi": {"num_frames": -3, "fps": 25, "timestamps": [[0, 60]], "sentences": ["a"]}},
     "num_frames must be >= 0"),
    ("tacos_test.json", {"s1.avi": {"num_frames": 300, "fps": 25, "timestamps": [[0, 10 ** 400]], "sentences": ["a"]}},
     "two finite numbers"),
    ("didemo_val.json", [{"annotation_id": "", "description": "a dog", "video": "v.mp4", "times": [[0, 1]] * 4,
      "num_segments": 6}],
     "non-empty query_id|empty"),
])
def test_corpus_rule_breaks_are_annotation_errors_naming_the_file(tmp_path: Path, name: str, content: object,
                                                                  message: str) -> None:
    p = write(tmp_path / name, json.dumps(content))
    with pytest.raises(AnnotationError, match=message) as e:
        load_corpus(p)
    assert str(e.value).startswith(str(p))


def test_tvr_odd_types_and_video2dur_shapes(tmp_path: Path) -> None:
    # a query without ground truth and an odd `type` used to crash corpus.stats() (data info)
    p = write(tmp_path / "tvr_test_public_release.jsonl", json.dumps({"desc_id": 5, "desc": "x", "type": [1]}) + "\n")
    with pytest.raises(AnnotationError, match=":1: field 'type' must be one of v, t, vt"):
        load_tvr(p)
    good = write(tmp_path / "tvr_val_release.jsonl", GOOD["tvr_val_release.jsonl"][1])
    for v2d, message in (({"val": 3}, "must map video names"), ({"val": {"v": [-2.0, 0]}}, "duration >= 0"),
                         ({"val": {"v": [10 ** 400, 0]}}, "duration >= 0")):
        with pytest.raises(AnnotationError, match=message):
            load_tvr(good, write(tmp_path / "tvr_video2dur_idx.json", json.dumps(v2d)), split="val")
    csv_path = write(tmp_path / "Charades_v1_test.csv", "id,length\nAO8RW,-inf\n")
    txt = write(tmp_path / "charades_sta_test.txt", GOOD["charades_sta_test.txt"][1])
    with pytest.raises(AnnotationError, match=r"Charades_v1_test.csv:2: 'length' must be a finite number"):
        load_charades_sta(txt, csv_path)


def test_generic_jsonl_checks_types_clamps_spans_and_keeps_lone_surrogates(tmp_path: Path) -> None:
    from momentsearch.data.loaders import write_jsonl_corpus

    video = {"record": "video", "video_id": "v1", "duration": 30.0, "split": "test", "clip_length": 2.0,
             "subtitles": [[0.0, 2.0, "hi"]], "meta": {}}
    moment = {"record": "moment", "query_id": "q1", "text": "a \ud800 sits", "video_id": "v1", "spans": [[-5.0, 40.0]],
              "split": "test", "query_type": "v", "meta": {}}
    p = write(tmp_path / "c.jsonl", json.dumps(moment) + "\n" + json.dumps(video) + "\n")  # video after its moment
    c = load_jsonl_corpus(p)
    m = c.moments[0]
    assert m.spans == ((0.0, 30.0),) and m.meta["quirks"] == ["end_after_duration", "negative_start"]
    assert m.meta["raw_spans"] == [[-5.0, 40.0]]
    out = write_jsonl_corpus(c, tmp_path / "out.jsonl")  # a lone surrogate used to break `data convert`
    assert load_jsonl_corpus(out).moments[0] == m  # escaped, so the round trip is lossless
    for change, message in (({"clip_length": float("nan")}, "finite number"), ({"clip_length": 0}, "> 0"),
                            ({"subtitles": [[float("nan"), 1.0, "x"]]}, "finite times"), ({"meta": []}, "'meta'"),
                            ({"split": ["a"]}, "'split'")):
        p = write(tmp_path / "bad.jsonl", json.dumps({**video, **change}) + "\n")
        with pytest.raises(AnnotationError, match=message):
            load_jsonl_corpus(p)
    p = write(tmp_path / "bad.jsonl", json.dumps(video) + "\n" + json.dumps({**moment, "query_type": {}}) + "\n")
    with pytest.raises(AnnotationError, match=":2: field 'query_type'"):
        load_jsonl_corpus(p)


def test_streamed_jsonl_reader_equals_the_whole_one_and_names_bad_lines(tmp_path: Path) -> None:
    from momentsearch.data.corpus import Moment, Video
    from momentsearch.data.loaders import iter_jsonl_corpus

    recs = [{"record": "header", "format": "momentsearch-corpus", "version": 1, "name": "c"},
            {"record": "video", "video_id": "v", "duration": 5, "split": "test"},
            {"record": "moment", "query_id": 1, "text": "t", "video_id": "v", "spans": [[2, 9]], "split": "test"},
            {"record": "video", "video_id": "w", "duration": 8.5},
            {"record": "moment", "query_id": "q2", "text": "u", "video_id": "w", "spans": [[1, 2]]}]
    f = write(tmp_path / "c.jsonl", "\ufeff" + "".join(json.dumps(r) + "\n" for r in recs) + "\n")
    whole = load_jsonl_corpus(f)
    items = list(iter_jsonl_corpus(f))
    assert [x for x in items if isinstance(x, Video)] == list(whole.videos.values())
    assert [x for x in items if isinstance(x, Moment)] == whole.moments
    assert items[1].spans == ((2.0, 5.0),) and items[1].meta["quirks"]  # clamped to its video, as the whole reader does
    assert [v.video_id for v in iter_jsonl_corpus(f, moments=False)] == ["v", "w"]
    bad = write(tmp_path / "bad.jsonl", json.dumps(recs[1]) + "\n[1, 2]\n")
    with pytest.raises(AnnotationError, match=r"bad.jsonl:2: expected a JSON object, got list"):
        list(iter_jsonl_corpus(bad))
    (tmp_path / "utf.jsonl").write_bytes(json.dumps(recs[1]).encode() + b"\n" + b'{"record": "vid\xff"}\n')
    with pytest.raises(AnnotationError, match=r"utf.jsonl:2: not valid UTF-8: byte 0xff at column 16"):
        list(iter_jsonl_corpus(tmp_path / "utf.jsonl"))
    worse = write(tmp_path / "worse.jsonl", json.dumps(recs[1]) + '\n{"record": "moment", "query_id": ""}\n')
    with pytest.raises(AnnotationError, match=r"worse.jsonl:2: empty query_id"):
        list(iter_jsonl_corpus(worse))
    assert len(list(iter_jsonl_corpus(worse, moments=False))) == 1  # moment lines are passed over unread
    with pytest.raises(AnnotationError, match="file not found"):
        list(iter_jsonl_corpus(tmp_path / "none.jsonl"))
