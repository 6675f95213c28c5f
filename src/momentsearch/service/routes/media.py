"""``GET /videos/{id}`` (the file, with range requests: a browser seeks in it), ``GET /thumbnails/{id}?t=``
(a JPEG of the frame at ``t`` seconds), ``GET /v1/clips/{id}?start=&end=`` (the moment as its own MP4, cut exactly
and streamed as it is encoded: :mod:`momentsearch.video.export`) and ``GET /v1/cues/{id}?start=&end=`` (what is
said during it, from 0, as WebVTT or SRT). Files are found by id through the corpus, never from a client's path."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, Response, StreamingResponse
from starlette.concurrency import iterate_in_threadpool
from starlette.exceptions import HTTPException

from momentsearch.errors import VideoDecodeError
from momentsearch.service.deps import MediaDep, ServicesDep
from momentsearch.service.media import Media
from momentsearch.serving.clips import VideoSource
from momentsearch.video.export import clip_name

router = APIRouter()


def _known(media: Media, video_id: str) -> None:
    if video_id not in media.ids:
        raise HTTPException(404, f"no video {video_id[:200]!r} in this index")


@router.get("/videos/{video_id:path}", response_class=FileResponse)
def video(video_id: str, media: MediaDep) -> Response:
    """The video file (range requests: a browser seeks in it)."""
    _known(media, video_id)
    path = media.video_path(video_id)
    if path is None:
        raise HTTPException(404, f"video {video_id!r} has no video file (its corpus holds features only, "
                                 "or the file moved since ingest)")
    changed = media.changed(video_id, path)
    if changed:
        raise HTTPException(409, changed)
    return FileResponse(path, media_type=media.media_type(path))


@router.get("/thumbnails/{video_id:path}", responses={200: {"content": {"image/jpeg": {}}}})
def thumbnail(video_id: str, media: MediaDep, t: float = Query(0.0, ge=0.0, le=1e7, description="seconds")
              ) -> Response:
    """A JPEG of the frame at ``t`` seconds."""
    _known(media, video_id)
    path = media.video_path(video_id)
    changed = None if path is None else media.changed(video_id, path)
    if changed:
        raise HTTPException(409, changed)
    try:
        data = media.thumbnail(video_id, t)
    except VideoDecodeError as e:  # the file's path stays on the server: the message names the video
        reason = str(e).removeprefix(f"{path}: ")
        raise HTTPException(422, f"no thumbnail of video {video_id!r} at {t:.1f} s: {reason}") from None
    if data is None:
        raise HTTPException(404, f"video {video_id!r} has no video file")
    return Response(data, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})


def _source(media: Media, video_id: str) -> VideoSource:
    _known(media, video_id)  # (a 404 for an unknown id; no file: 404, changed since ingest: 409, by kind)
    return VideoSource.of(media.corpus, video_id)


@router.get("/v1/clips/{video_id:path}", responses={200: {"content": {"video/mp4": {}}}})
def clip(video_id: str, services: ServicesDep, start: float = Query(description="seconds from the video's start"),
         end: float = Query(description="seconds")) -> Response:
    """The moment ``[start, end)`` as an MP4 of its own (H.264 + AAC, every frame re-encoded, so the cut is exact
    to the frame), streamed as it is encoded; at most ``max_clip_seconds`` (a setting) long."""
    src = _source(services.media, video_id)
    s, e = src.span(start, end, services.settings.max_clip_seconds)  # a 400 before the first byte
    name = clip_name(video_id, s, e)
    return StreamingResponse(iterate_in_threadpool(src.stream(s, e)), media_type="video/mp4",
                             headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}"})


@router.get("/v1/cues/{video_id:path}", responses={200: {"content": {"text/vtt": {}, "application/x-subrip": {}}}})
def cues(video_id: str, media: MediaDep, start: float = Query(0.0, description="seconds"),
         end: float = Query(description="seconds"), format: str = Query("vtt", pattern="^(vtt|srt)$")) -> Response:
    """What is said during the moment (subtitles, transcript or recognised speech), its times from ``start``."""
    src = _source(media, video_id)
    s, e = src.span(start, end)
    return Response(src.cues(s, e, format), media_type="text/vtt" if format == "vtt" else "application/x-subrip")
