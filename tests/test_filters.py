"""Filters by what a corpus records (ids, path prefix, duration, ingest date): by hand on a small table, then
through the Python searcher, the service and the CLI, each against the unfiltered ranking restricted by hand."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest

from momentsearch.errors import QueryError
from momentsearch.serving.filters import VideoFilter, VideoTable, parse_utc

DAY = 86_400 * 10**9  # ns
JAN_1_2024 = 1_704_067_200 * 10**9  # the files' dates (mtime_ns), 2024-01-01T00:00:00Z
ENTRIES = {"a": {"path": "trip/a.mp4", "ingested_at": "2026-01-05T10:00:00Z", "mtime_ns": JAN_1_2024 + 10 * DAY},
           "b": {"path": "trip/2024/b.mkv", "ingested_at": "2026-02-01T00:00:00Z", "mtime_ns": JAN_1_2024},
           "c": {"path": "home/c.mp4", "mtime_ns": JAN_1_2024 + 40 * DAY},  # ingested before dates were recorded
           "d": {"path": "trips/d.mp4", "ingested_at": "2026-03-01T12:30:00Z"}}  # no file date
TABLE = VideoTable.of_entries(list(ENTRIES), np.array([10.0, 65.0, 300.0, 30.0]), ENTRIES)


@pytest.mark.parametrize("kw,rows", [
    ({}, [0, 1, 2, 3]),
    ({"path_prefix": "trip/"}, [0, 1]),
    ({"path_prefix": "trip"}, [0, 1, 3]),  # a prefix of characters: trips/ too
    ({"path_prefix": "/home/"}, [2]),  # a leading slash is not part of the stored relative path
    ({"min_duration": 30}, [1, 2, 3]),  # inclusive
    ({"max_duration": 30}, [0, 3]),
    ({"min_duration": 20, "max_duration": 100}, [1, 3]),
    ({"ingested_after": "2026-02-01"}, [1, 3]),  # inclusive; c has no date and never matches
    ({"ingested_before": "2026-02-01T00:00:00Z"}, [0]),  # exclusive
    ({"ingested_after": "2026-01-05T11:00:00+01:00", "ingested_before": "2026-03-01"}, [0, 1]),  # 10:00 UTC
    ({"path_prefix": "trip", "min_duration": 20, "ingested_after": "2026-02-15"}, [3]),
    ({"modified_after": "2024-01-01"}, [0, 1, 2]),  # inclusive; d has no file date
    ({"modified_after": "2024-01-02", "modified_before": "2024-02-10T00:00:00Z"}, [0]),  # c: Feb 10, exclusive
])
def test_rows_by_hand(kw: dict, rows: list[int]) -> None:
    assert TABLE.rows(VideoFilter.of(**kw)).tolist() == rows


def test_rows_within_chosen_ids() -> None:
    assert TABLE.rows(VideoFilter.of(max_duration=100), np.array([1, 2])).tolist() == [1]


@pytest.mark.parametrize("kw,message", [
    ({"videos": "a"}, "videos must be a non-empty list"), ({"videos": []}, "videos must be a non-empty list"),
    ({"path_prefix": "/"}, "path_prefix must be a non-empty"), ({"min_duration": -1}, "min_duration must be"),
    ({"max_duration": float("nan")}, "max_duration must be"), ({"min_duration": True}, "min_duration must be"),
    ({"min_duration": 10 ** 400}, "min_duration must be a finite number"),
    ({"min_duration": 9, "max_duration": 3}, "min_duration 9 is over max_duration 3"),
    ({"ingested_after": "last week"}, "ingested_after must be an ISO 8601 date"),
    ({"ingested_after": "2026-02-01", "ingested_before": "2026-01-01"}, "must be before ingested_before"),
    ({"modified_after": "2026-02-01", "modified_before": "2026-01-01"}, "modified_after .* must be before modified_before"),
])
def test_bad_filters_say_which_field(kw: dict, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        VideoFilter.of(**kw)


def test_no_paths_or_no_dates_is_an_error_not_an_empty_answer() -> None:
    bare = VideoTable.of_entries(["x", "y"], np.array([5.0, 6.0]), None)
    assert bare.rows(VideoFilter.of(min_duration=5.5)).tolist() == [1]
    with pytest.raises(QueryError, match="have no paths"):
        bare.rows(VideoFilter.of(path_prefix="a/"))
    with pytest.raises(QueryError, match="records no ingest dates"):
        bare.rows(VideoFilter.of(ingested_after="2026-01-01"))
    with pytest.raises(QueryError, match="have no file dates"):
        bare.rows(VideoFilter.of(modified_before="2026-01-01"))


def test_dates_are_utc() -> None:
    assert parse_utc("2026-11-01") == datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert parse_utc("2026-11-01T12:00:00Z") == parse_utc("2026-11-01T13:00:00+01:00")
    assert VideoFilter.of(ingested_after="2026-11-01").key == VideoFilter.of(ingested_after="2026-11-01T00:00Z").key


# ---- through the searcher, the service, the client and the CLI over the served index ----------------------------

Q = "a white square"


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory):
    import momentsearch
    from served_index import build_served_index

    index = build_served_index(tmp_path_factory.mktemp("filters"))
    s = momentsearch.load(index, device="cpu", first_stage="exact")
    s.index_dir = index  # for the CLI test
    return s


def _same(got: list, want: list) -> bool:
    return [(h.video_id, h.start, h.end) for h in got] == [(h.video_id, h.start, h.end) for h in want] and all(
        g.score == pytest.approx(w.score, rel=1e-5) for g, w in zip(got, want, strict=True))


def _restricted(searcher, keep: set[str]) -> list:
    """The unfiltered ranking's moments of the kept videos (exact search: a filter restricts, never reorders)."""
    return [h for h in searcher.search(Q, k=1000) if h.video_id in keep]


@pytest.mark.slow  # 5.3-6.4 s under make test
def test_ingest_records_dates_and_the_searcher_filters(searcher) -> None:
    entries = {v["id"]: v for v in searcher.corpus.manifest.videos}
    assert entries["clip0"]["path"] == "clip0.mp4"
    for v in entries.values():  # written by this test run's ingest, minutes ago at most
        age = datetime.now(timezone.utc) - parse_utc(v["ingested_at"])
        assert 0 <= age.total_seconds() < 3600
    # durations 6, 9 and 4 s (served_index.DURATIONS)
    cases = [(VideoFilter.of(path_prefix="clip1"), {"clip1"}), (VideoFilter.of(path_prefix="other/"), set()), (VideoFilter.of(min_duration=5), {"clip0", "clip1"}),
             (VideoFilter.of(max_duration=5, videos=["clip1", "clip2"]), {"clip2"}),
             (VideoFilter.of(ingested_after="2000-01-01"), {"clip0", "clip1", "clip2"}),
             (VideoFilter.of(ingested_before="2000-01-01"), set())]
    for where, keep in cases:
        got = searcher.search(Q, k=1000, where=where)
        assert _same(got, _restricted(searcher, keep)), where
    assert searcher.search(Q, k=5, videos=["clip0"], where=VideoFilter.of(videos=["clip1"])) == []


def test_the_service_and_client_filter_alike(searcher) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from momentsearch.service.app import create_app

    with TestClient(create_app(searcher, max_batch=4, max_wait_ms=1)) as c:
        r = c.post("/v1/search", json={"query": Q, "k": 100, "min_duration": 5, "path_prefix": "clip"}).json()
        assert [(m["video_id"], m["start"]) for m in r["moments"]] == [
            (h.video_id, round(h.start, 3)) for h in _restricted(searcher, {"clip0", "clip1"})]
        b = c.post("/v1/search/batch", json={"queries": [Q, Q], "k": 3, "ingested_before": "2000-01-01"}).json()
        assert [x["moments"] for x in b["results"]] == [[], []]
        bad = c.post("/v1/search", json={"query": Q, "ingested_after": "yesterday"})
        assert bad.status_code == 400 and bad.json()["error"].startswith("ingested_after must be an ISO 8601")
        bad = c.post("/v1/search", json={"query": Q, "min_duration": "5"})
        assert bad.status_code == 422 and bad.json()["error"].startswith("min_duration")


def test_the_cli_filters(searcher, capsys: pytest.CaptureFixture) -> None:
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    index = str(searcher.index_dir)
    r = CliRunner().invoke(app, ["search", index, Q, "-k", "50", "--json", "--first-stage", "exact", "--device", "cpu",
                                 "--max-duration", "6", "--path-prefix", "clip"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)[0]["moments"]
    assert [(m["video_id"], m["start"]) for m in got] == [(h.video_id, h.start) for h in _restricted(searcher, {"clip0", "clip2"})]
    r = CliRunner().invoke(app, ["search", index, Q, "--ingested-after", "soon"])
    assert r.exit_code != 0 and "ingested_after must be an ISO 8601" in f"{r.output} {r.exception}"
