"""A test-only visual encoder whose process dies on an all-black clip, as a crash inside a codec would
(sent to Ray actors by value: tests/test_damaged_videos.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from momentsearch.video.encoders.builtin import BuiltinEncoder


class DyingEncoder(BuiltinEncoder):
    def encode(self, clips: Sequence[np.ndarray], previous: np.ndarray | None = None) -> np.ndarray:
        if any(int(c.max()) < 8 for c in clips):
            os._exit(3)
        return super().encode(clips, previous)
