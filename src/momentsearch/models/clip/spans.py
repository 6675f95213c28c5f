"""The training-free rule over what is seen and what is said, for one query and one video, in seconds.

Per clip t of the video (T clips of ``dt`` seconds): ``c_t``, the cosine of the query's CLIP text embedding
with the clip's image embedding (what is seen), and ``s_t``, the cosine of the query's MiniLM sentence
embedding with the clip's speech embedding (MiniLM of the cue texts overlapping the clip, what is said);
``s_t = 0`` where nothing is said. ``cue_t``: the span [first start, last end] of the cues overlapping clip t.

**Candidates.**
* seen: the similarity runs of :func:`momentsearch.models.clip.moments.similarity_moments` over ``c``
  (mean + kappa * std threshold, runs cut at ``max_clips``), on the clip grid;
* said (and written, the same way, over its own cues): over the clips where something is said, threshold ``mean(s) + kappa * std(s)`` over those clips;
  a moment is a run of consecutive such clips at or above it (cut at ``max_clips``; the best clip alone when
  none is), and spans its cues: from the first cue start to the last cue end of its clips. Cues that run on
  (one sentence over several cues, or several clips) are so merged into one moment. Each spoken clip's own
  cues are candidates too, so every line said can be found (within a time range, say), ranked by its score.

**Score** of a span [a, b), over the clips it overlaps:
  seen  V = (1 + mean of c) / 2;   said  S = (1 + max of s) / 2   (0.5 where nothing is said: cosine 0);
  written W = (1 + max of w) / 2, as said, over the MiniLM vectors of the text read on screen (``w_t``, with
  its own cue spans: a line's time on screen);
  a family scores the mean of the streams it searches: V alone, (V + S) / 2, (V + S + W) / 3, ... Each is a
  cosine of one text tower against one embedding space, comparable across videos, so the scores rank
  moments across the corpus. Every span, whichever stream proposed it, is scored by the same rule, and
  identical spans are kept once; equal scores rank the longer span first. A stream the query does not speak to
  (a picture's said stream: its query vector is zero, so every cosine is 0) proposes no span and adds 0.5.

A video's retrieval score is the mean over the searched streams of the best clip's cosine (``ClipMaxRetriever``),
so no moment of a video scores above (1 + its retrieval score) / 2 (the engine's score bound).
"""

from __future__ import annotations

import numpy as np

from momentsearch.models.clip.moments import similarity_moments


def said_runs(s: np.ndarray, spoken: np.ndarray, kappa: float, max_clips: int) -> list[tuple[int, int]]:
    """(first clip, last clip) of each run of spoken clips at or above the threshold (see the module)."""
    idx = np.flatnonzero(spoken)
    if len(idx) == 0:
        return []
    vals = s[idx]
    above = np.zeros(len(s), bool)
    above[idx] = vals >= vals.mean() + kappa * vals.std()
    if not above.any():
        above[idx[int(np.argmax(vals))]] = True
    edges = np.flatnonzero(np.diff(np.concatenate([[0], above.astype(np.int8), [0]])))
    out = []
    for a, b in zip(edges[0::2], edges[1::2], strict=True):
        out += [(p, min(p + max_clips, b) - 1) for p in range(a, b, max_clips)]
    return out


def video_spans(c: np.ndarray | None, s: np.ndarray | None, cues: np.ndarray, dt: float, duration: float,
                kappa: float, max_clips: int, smooth: int,
                more: tuple[tuple[np.ndarray, np.ndarray], ...] = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start s, end s, score) of one video's moments, best first. ``c``: (T,) seen cosines or None (not
    searched); ``s``: (T,) said cosines or None; ``cues``: (T, 2) cue spans, start < 0 where none; ``more``:
    further text streams searched the way said is, each (cosines, cue spans): the text written on screen."""
    texts = ([(s, cues)] if s is not None else []) + list(more)
    t = len(c) if c is not None else len(texts[0][0])
    cand: list[tuple[float, float]] = []
    if c is not None and np.any(c):  # (a query with no seen part, a picture's said stream: cosine 0, proposes nothing)
        st, ed, _ = similarity_moments(c, kappa, max_clips, smooth)
        cand += [(float(a) * dt, min(float(b + 1) * dt, duration)) for a, b in zip(st, ed, strict=True)]
    for x, cue in texts:
        spoken = cue[:, 0] >= 0
        if not np.any(x[spoken]):
            continue
        for a, b in said_runs(x, spoken, kappa, max_clips):
            cand.append((float(cue[a:b + 1, 0][spoken[a:b + 1]].min()), float(cue[a:b + 1, 1][spoken[a:b + 1]].max())))
        cand += [(float(cue[i, 0]), float(cue[i, 1])) for i in np.flatnonzero(spoken)]
    if not cand:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.float32)
    span = np.unique(np.asarray(cand, np.float64), axis=0)
    first = np.clip(np.floor(span[:, 0] / dt + 1e-9), 0, t - 1).astype(np.int64)
    last = np.clip(np.ceil(span[:, 1] / dt - 1e-9) - 1, first, t - 1).astype(np.int64)
    parts = []
    if c is not None:
        cs = np.concatenate([[0.0], np.cumsum(np.asarray(c, np.float64))])
        parts.append((1.0 + (cs[last + 1] - cs[first]) / (last - first + 1)) / 2.0)
    for x, _ in texts:
        best = np.array([np.max(x[a:b + 1]) for a, b in zip(first, last, strict=True)], np.float64)
        parts.append((1.0 + best) / 2.0)
    score = np.mean(parts, axis=0)
    order = np.lexsort((span[:, 0], span[:, 0] - span[:, 1], -score))
    return span[order, 0], span[order, 1], score[order].astype(np.float32)
