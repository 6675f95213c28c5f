"""``GET /videos/{id}`` (the file, with range requests: a browser seeks in it) and ``GET /thumbnails/{id}?t=``
(a JPEG of the frame at ``t`` seconds). Files are found by id through the corpus, never from a client's path."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, Response
from starlette.exceptions import HTTPException

from momentsearch.errors import VideoDecodeError
from momentsearch.service.deps import MediaDep
from momentsearch.service.media import Media

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
