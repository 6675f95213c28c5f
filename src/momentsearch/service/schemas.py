"""What the API reads and writes: one request base class (one query check, one ``MAX_K``), the options of
``/v1``, and the response models (for the API docs; answers are written by :func:`json_response`)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

import orjson
from fastapi import Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from momentsearch.errors import QueryError
from momentsearch.service.settings import MAX_BODY_BYTES
from momentsearch.serving.filters import VideoFilter
from momentsearch.serving.plan import MAX_RANKED, SearchPlan
from momentsearch.serving.query import Query
from momentsearch.serving.searcher import Searcher
from momentsearch.text.query_file import MAX_QUERY_CHARS  # one limit for query files and the service

MAX_K = 100  # moments on one page
MAX_OFFSET = MAX_RANKED - MAX_K  # offset + k <= 1000 moments a query: what one search ranks at the most
MAX_BATCH_QUERIES = 64
MAX_VIDEOS = 10_000


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("the query is empty")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the query holds a character that is not text (a lone UTF-16 surrogate)") from None
    return v.strip()


QueryText = Annotated[StrictStr, Field(max_length=MAX_QUERY_CHARS, description="What to look for, e.g. 'a person "
                                                                                "opens the fridge'"),
                      AfterValidator(_not_blank)]
Number = StrictFloat | StrictInt


class Request(BaseModel):
    """Every search request: unknown fields refused, ``k`` a page of at most :data:`MAX_K` moments, ``videos``."""

    model_config = ConfigDict(extra="forbid")
    k: StrictInt = Field(10, ge=1, le=MAX_K, description="Moments on this page")
    videos: list[StrictStr] | None = Field(None, min_length=1, max_length=MAX_VIDEOS, description="Search only these ids")

    def plan(self, searcher: Searcher) -> SearchPlan:
        """The request checked once against the index (unknown ids, filters the corpus cannot answer: a 400)."""
        return searcher.plan(self.k, where=VideoFilter.of(self.videos))


class SearchRequest(Request):
    """``POST /search``."""

    query: QueryText


class Options(Request):
    """``/v1``'s paging, threshold, time range, grouping, filters and timeout."""

    offset: StrictInt = Field(0, ge=0, le=MAX_OFFSET, description="Moments skipped: the previous page's next_offset")
    min_score: Number | None = Field(None, description="Drop moments scoring below this")
    group_by_video: StrictBool = Field(False, description="Each video's best per_video moments together")
    per_video: StrictInt = Field(1, ge=1, le=100, description="With group_by_video: moments kept per video")
    time_from: Number | None = Field(None, ge=0, le=1e9, description="Moments ending after this second of their video")
    time_to: Number | None = Field(None, ge=0, le=1e9, description="Moments starting before this second of their video")
    path_prefix: StrictStr | None = Field(None, max_length=1000, description="Videos whose path (relative to the "
                                                                             "ingested folder) starts with this")
    min_duration: Number | None = Field(None, ge=0, description="Videos at least this long (s)")
    max_duration: Number | None = Field(None, ge=0, description="Videos at most this long (s)")
    ingested_after: StrictStr | None = Field(None, max_length=64, description="Videos ingested at or after this "
                                                                             "UTC time (ISO 8601)")
    ingested_before: StrictStr | None = Field(None, max_length=64, description="Videos ingested before this UTC "
                                                                              "time (ISO 8601)")
    modified_after: StrictStr | None = Field(None, max_length=64, description="Videos whose file is dated at or "
                                                                             "after this UTC time (ISO 8601)")
    modified_before: StrictStr | None = Field(None, max_length=64, description="Videos whose file is dated before "
                                                                              "this UTC time (ISO 8601)")
    timeout_ms: StrictInt | None = Field(None, ge=1, le=600_000, description="Give up after this long (504); "
                                                                            "default: the server's")

    def plan(self, searcher: Searcher) -> SearchPlan:
        where = VideoFilter.of(self.videos, self.path_prefix, self.min_duration, self.max_duration,
                               self.ingested_after, self.ingested_before, self.modified_after, self.modified_before)
        return searcher.plan(self.k, self.offset, self.min_score, where=where, time_from=self.time_from,
                             time_to=self.time_to, per_video=self.per_video if self.group_by_video else None,
                             paged=True)


class MomentRefV1(BaseModel):
    """A found moment to search like (``like``)."""

    model_config = ConfigDict(extra="forbid")
    video_id: StrictStr = Field(min_length=1, max_length=1000)
    start: Number = Field(ge=0, le=1e9)
    end: Number = Field(ge=0, le=1e9)


class SearchV1(Options):
    """``POST /v1/search``: words (``query``), a picture (``image``, base64) or a found moment (``like``), or words
    with either (each weighs alike: docs/service.md)."""

    query: QueryText | None = None
    image: StrictStr | None = Field(None, max_length=MAX_BODY_BYTES, description="A picture to search with: its "
                                    "file (JPEG, PNG, WebP...) in base64, within the body limit")
    like: MomentRefV1 | None = Field(None, description="More like this moment: {video_id, start, end}")

    def asked(self) -> str | Query:
        """What to search for: the words, or a :class:`~momentsearch.serving.query.Query` (a bad picture: a 400)."""
        if self.image is None and self.like is None:
            if self.query is None:
                raise QueryError("give query (words), image (a picture in base64) or like (a moment)")
            return self.query
        image = None
        if self.image is not None:
            try:
                image = base64.b64decode(self.image, validate=True)
            except (binascii.Error, ValueError):
                raise QueryError("image: not base64 (send the picture file's bytes in base64)") from None
        like = None if self.like is None else (self.like.video_id, self.like.start, self.like.end)
        return Query(self.query, image=image, like=like)


class BatchV1(Options):
    """``POST /v1/search/batch``."""

    queries: list[QueryText] = Field(min_length=1, max_length=MAX_BATCH_QUERIES, description="What to look for, each")


class Moment(BaseModel):
    rank: int
    video_id: str
    start: float
    end: float
    score: float
    thumbnail_url: str | None
    video_url: str | None
    annotation: str | None
    said: str | None = Field(None, description="What is said during the moment (subtitles, transcript or "
                                                "recognised speech)")
    written: str | None = Field(None, description="The text read on screen during the moment (ingest --read-text)")


class SearchResponse(BaseModel):
    query: str
    k: int
    took_ms: float
    moments: list[Moment]


class ResultV1(BaseModel):
    """One query's page."""

    query: str
    k: int
    offset: int
    next_offset: int | None
    moments: list[Moment]


class PageV1(ResultV1):
    took_ms: float


class BatchPageV1(BaseModel):
    took_ms: float
    results: list[ResultV1]


def json_response(body: dict, headers: dict[str, str] | None = None, status_code: int = 200) -> Response:
    """JSON written by orjson straight to bytes (FastAPI's own encoder walks the objects in Python first)."""
    return Response(orjson.dumps(body), media_type="application/json", headers=headers, status_code=status_code)
