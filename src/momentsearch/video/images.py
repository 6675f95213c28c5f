"""A picture to search with: :func:`read_image` reads a path, encoded bytes (JPEG, PNG, WebP, GIF, BMP...) or an
array into (H, W, 3) uint8 RGB, and :func:`frame_of` scales it as the decoder scales a video's frames for the
encoder, so that a picture and a clip of the same scene land in the same place.

What is not a picture is an :class:`ImageError` (a :class:`~momentsearch.errors.QueryError`: the service's 4xx)
that says what was wrong: not an image, damaged, empty, over :data:`MAX_PIXELS` (checked from the header, before
decoding, so a decompression bomb costs nothing), or an array of the wrong shape or type.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.errors import QueryError

MAX_PIXELS = 40_000_000  # width x height (a 50-megapixel camera's photo is about 8,000 x 6,000 = 48 M: refused)
MAX_BYTES = 32 * 1024 * 1024


class ImageError(QueryError):
    """Not a picture that can be searched with (names why)."""


def read_image(source: Any, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """(H, W, 3) uint8 RGB from a path, bytes or an array ((H, W), (H, W, 3) or (H, W, 4), uint8; or floats in
    [0, 1])."""
    if isinstance(source, np.ndarray):
        return _from_array(source, max_pixels)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, what = bytes(source), "the uploaded picture"
    elif isinstance(source, (str, Path)):
        p = Path(source)
        if not p.is_file():
            raise ImageError(f"{p}: no such picture file")
        if p.stat().st_size > MAX_BYTES:
            raise ImageError(f"{p}: {p.stat().st_size:,} bytes, over the {MAX_BYTES:,} a picture may have")
        data, what = p.read_bytes(), str(p)
    else:
        raise ImageError(f"a picture is a path, bytes or an (H, W, 3) array, not {type(source).__name__}")
    if not data:
        raise ImageError(f"{what}: empty")
    if len(data) > MAX_BYTES:
        raise ImageError(f"{what}: {len(data):,} bytes, over the {MAX_BYTES:,} a picture may have")
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            if w * h > max_pixels or w < 1 or h < 1:
                raise ImageError(f"{what}: {w}x{h} pixels; a picture may have at most {max_pixels:,}")
            im.seek(0)  # an animation: its first frame
            rgb = np.asarray(im.convert("RGB"), np.uint8)
    except ImageError:
        raise
    except UnidentifiedImageError:
        raise ImageError(f"{what}: not a picture (no image format recognised: JPEG, PNG, WebP, GIF, BMP, TIFF...)"
                         ) from None
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError, MemoryError, IndexError,
            TypeError, KeyError, ZeroDivisionError) as e:  # Pillow's ways of saying "damaged"
        raise ImageError(f"{what}: a damaged picture ({type(e).__name__}: {str(e)[:120]})") from None
    return _from_array(rgb, max_pixels)


def _from_array(x: np.ndarray, max_pixels: int) -> np.ndarray:
    if x.ndim == 2:
        x = np.repeat(x[:, :, None], 3, axis=2)
    if x.ndim != 3 or x.shape[2] not in (3, 4) or x.shape[0] < 1 or x.shape[1] < 1:
        raise ImageError(f"a picture array is (H, W, 3) RGB, got shape {x.shape}")
    if x.shape[0] * x.shape[1] > max_pixels:
        raise ImageError(f"a picture of {x.shape[1]}x{x.shape[0]} pixels; at most {max_pixels:,}")
    if x.dtype != np.uint8:
        if not np.issubdtype(x.dtype, np.floating) or not np.isfinite(x).all() or x.min() < 0 or x.max() > 1:
            raise ImageError(f"a picture array is uint8, or floats in [0, 1]; got {x.dtype}")
        x = np.round(x * 255).astype(np.uint8)
    return np.ascontiguousarray(x[:, :, :3])


def frame_of(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The picture scaled to ``size`` (width, height) by ffmpeg's scaler, as :func:`~momentsearch.video.decode.
    clip_frames` scales a video's frames."""
    import av

    w, h = size
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:, :, :3]), format="rgb24")
    return frame.to_ndarray(width=w, height=h, format="rgb24")


__all__ = ["MAX_BYTES", "MAX_PIXELS", "ImageError", "frame_of", "read_image"]
