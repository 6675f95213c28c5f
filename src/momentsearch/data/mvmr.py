"""MVMR retrieval pools (Yang et al., Secs. 3-4): per query, n videos to search, the gold one
first, then up to k-1 extra positive videos (each with its positive moment), then negatives.

The authors' released files (``charades_test_mvmr.json``, ``tacos_test_mvmr.json``) are one JSON
object keyed by the gold video id; each value holds the video's queries in the order of the 2D-TAN
test annotation (``timestamps``, ``sentences``), ``pos_moments`` (per query, the extra positives
``[video_id, that video's sentence, [start, end]]``) and ``retrieval_pool`` (per query, the video
ids). TACoS spans are frames (the record has ``fps`` and ``num_frames``), others seconds. A query
whose pool is empty has no pool (the paper drops queries with fewer than n candidates).

:func:`load_mvmr_pools` joins a file to the annotation split it was built from, so that its
queries carry the loaders' query ids; :func:`write_mvmr_pools` writes the same format (seconds).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.data.corpus import Corpus, Span, clean_span
from momentsearch.data.loaders._common import (
    get_field,
    is_finite_number,
    iter_video_records,
    paired_sentences,
    require_file,
)
from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import AnnotationError
from momentsearch.fileio import write_json

# The paper's Table 3 (Appendix B), for `data info` to set the loaded pools beside.
PAPER_TABLE3 = {
    "charades": {"n_queries": 3716, "n_videos": 1334, "moment_len_s": 7.83, "video_len_s": 29.48,
                 "positives_per_query": 3.07, "query_words": 6.23, "pool_size": 50, "max_positives": 5},
    "activitynet": {"n_queries": 16941, "n_videos": 4885, "moment_len_s": 40.32, "video_len_s": 118.20,
                    "positives_per_query": 1.11, "query_words": 12.03, "pool_size": 50, "max_positives": 5},
    "tacos": {"n_queries": 2055, "n_videos": 25, "moment_len_s": 28.55, "video_len_s": 367.15,
              "positives_per_query": 2.24, "query_words": 7.31, "pool_size": 5, "max_positives": 5},
}
# Where the released files' annotations lie, relative to the pool file's folder (../shared/data layout).
ANNOTATIONS_BESIDE = {"charades": "../charades_sta/charades_sta_test.txt", "tacos": "../tacos/test.json",
                      "activitynet": "../activitynet_captions/test.json"}  # 2D-TAN test.json = val_2


@dataclass
class Positive:
    """One positive moment of a query's pool: the gold one, or an extra one in another video."""

    video_id: str
    span: Span
    sentence: str  # the sentence that video is annotated with (the gold query's own for the gold one)


@dataclass
class MVMRPools:
    """Pools over one annotation split: ``pools[qid]`` the videos, ``positives[qid]`` gold first."""

    name: str
    corpus: Corpus
    pools: dict[str, list[str]]
    positives: dict[str, list[Positive]]
    join: dict[str, int] = field(default_factory=dict)  # how the file matched its annotations

    @property
    def query_ids(self) -> list[str]:
        return list(self.pools)

    @property
    def pool_size(self) -> int:
        return max((len(p) for p in self.pools.values()), default=0)

    def full(self) -> MVMRPools:
        """Only the pools of the largest size (the paper counts these; smaller ones are left over)."""
        n = self.pool_size
        keep = [q for q, p in self.pools.items() if len(p) == n]
        return MVMRPools(self.name, self.corpus, {q: self.pools[q] for q in keep},
                         {q: self.positives[q] for q in keep}, dict(self.join))

    def relevance(self, video_ids: Sequence[str] | None = None) -> MomentRelevance:
        """Every positive moment of each pooled query, value 1.0 (the MVMR hit set)."""
        vids = list(video_ids) if video_ids is not None else list(self.corpus.videos)
        index = {v: i for i, v in enumerate(vids)}
        rows = [[(index[p.video_id], p.span[0], p.span[1], 1.0) for p in self.positives[q]] for q in self.pools]
        return MomentRelevance.from_rows(self.query_ids, vids, rows)

    def pool_indices(self, video_ids: Sequence[str]) -> list[list[int]]:
        index = {v: i for i, v in enumerate(video_ids)}
        return [[index[v] for v in self.pools[q]] for q in self.pools]

    def stats(self) -> dict[str, Any]:
        """The columns of the paper's Table 3 (its moment length is the gold moment's), plus counts."""
        moments = {m.query_id: m for m in self.corpus.moments}
        pos = [len(p) for p in self.positives.values()]
        all_lens = [p.span[1] - p.span[0] for ps in self.positives.values() for p in ps]
        gold_lens = [ps[0].span[1] - ps[0].span[0] for ps in self.positives.values() if ps]
        vids = list(dict.fromkeys(moments[q].video_id for q in self.pools))  # ordered: sums repeat exactly
        sizes = Counter(len(p) for p in self.pools.values())
        mean = (lambda xs: float(np.mean(xs)) if len(xs) else math.nan)
        return {
            "n_queries": len(self.pools), "n_videos": len(vids),
            "moment_len_s": mean(gold_lens), "positive_moment_len_s": mean(all_lens),
            "video_len_s": mean([self.corpus.videos[v].duration for v in vids]),  # type: ignore[index]
            "positives_per_query": mean(pos), "query_words": mean([len(moments[q].text.split()) for q in self.pools]),
            "pool_size": self.pool_size, "max_positives": max(pos, default=0),
            "queries_without_extra_positives": sum(1 for n in pos if n == 1),
            "pool_sizes": {str(k): v for k, v in sorted(sizes.items())},
            "pool_videos_distinct": len({v for p in self.pools.values() for v in p}),
            **{f"join_{k}": v for k, v in self.join.items()},
        }


def dataset_of(path: Path) -> str | None:
    """'charades_test_mvmr.json' -> 'charades' (the key of PAPER_TABLE3), or None."""
    name = path.name.lower()
    return next((d for d in PAPER_TABLE3 if name.startswith(d[:4])), None)


def default_annotations(path: Path) -> Path:
    ds = dataset_of(path)
    guess = (path.parent / ANNOTATIONS_BESIDE[ds]).resolve() if ds else None
    if guess is None or not guess.is_file():
        raise AnnotationError(path, "cannot tell which annotation file these pools were built from; pass it "
                                    "(e.g. --annotations charades_sta/charades_sta_test.txt or tacos/test.json)")
    return guess


def _video_key(vid: str, corpus: Corpus) -> str | None:
    for cand in (vid, f"{vid}.avi", vid.removesuffix(".avi")):
        if cand in corpus.videos:
            return cand
    return None


def load_mvmr_pools(path: str | Path, annotations: Corpus | str | Path | None = None) -> MVMRPools:
    """Read a pool file and join it, query by query, to the annotation split it was built from."""
    from momentsearch.data.loaders import load_corpus

    p = require_file(path)
    corpus = annotations if isinstance(annotations, Corpus) else load_corpus(
        annotations if annotations is not None else default_annotations(p))
    by_video = corpus.moments_by_video()
    pools: dict[str, list[str]] = {}
    positives: dict[str, list[Positive]] = {}
    join = Counter({"text_differs": 0, "span_differs": 0, "queries_without_pool": 0})
    for vid, rec, err in iter_video_records(p, "timestamps, sentences, pos_moments, retrieval_pool"):
        key = _video_key(vid, corpus)
        if key is None:
            raise err(f"video {vid!r} is not in the annotations {corpus.name}")
        fps = get_field(rec, "fps", float, err) if "fps" in rec else None  # TACoS: spans in frames
        if fps is not None and fps <= 0:
            raise err(f"fps must be > 0, got {fps}")
        pairs = paired_sentences(rec, err)
        pos_lists = get_field(rec, "pos_moments", list, err)
        pool_lists = get_field(rec, "retrieval_pool", list, err)
        if not len(pairs) == len(pos_lists) == len(pool_lists):
            raise err(f"{len(pairs)} sentences, {len(pos_lists)} pos_moments and {len(pool_lists)} retrieval_pool "
                      "lists: one of each per query")
        ann = by_video.get(key, [])
        if len(ann) != len(pairs):
            raise err(f"{len(pairs)} queries here but {len(ann)} for video {key!r} in {corpus.name}: not the split "
                      "these pools were built from")

        def seconds(raw: Any, what: str, vid_key: str) -> Span:
            if not (isinstance(raw, list) and len(raw) == 2 and all(is_finite_number(x) for x in raw)):
                raise err(f"{what}: span must be [start, end] with two finite numbers, got {raw!r}")
            st, ed = (float(x) / fps for x in raw) if fps is not None else (float(x) for x in raw)
            return clean_span(st, ed, corpus.videos[vid_key].duration)[0]

        for i, ((ts, sent), extra, pool, m) in enumerate(zip(pairs, pos_lists, pool_lists, ann, strict=True)):
            span = seconds(ts, f"query {i}", key)
            join["text_differs"] += sent.strip().lower() != m.text.strip().lower()
            join["span_differs"] += max(abs(span[0] - m.span[0]), abs(span[1] - m.span[1])) > 0.05
            if not isinstance(pool, list) or not all(isinstance(v, str) for v in pool):
                raise err(f"query {i}: retrieval_pool must be a list of video ids")
            if not pool:
                join["queries_without_pool"] += 1
                continue
            pool_keys = []
            for v in pool:
                k = _video_key(v, corpus)
                if k is None:
                    raise err(f"query {i}: pool video {v!r} is not in the annotations {corpus.name}")
                pool_keys.append(k)
            if pool_keys[0] != key:
                raise err(f"query {i}: the pool must start with the gold video {vid!r}, got {pool[0]!r}")
            if len(set(pool_keys)) != len(pool_keys):
                raise err(f"query {i}: a video appears twice in its retrieval_pool")
            plist = [Positive(key, m.span, m.text)]
            if not isinstance(extra, list):
                raise err(f"query {i}: pos_moments must be a list")
            for j, e in enumerate(extra):
                if not (isinstance(e, list) and len(e) == 3 and isinstance(e[0], str) and isinstance(e[1], str)):
                    raise err(f"query {i}, extra positive {j}: expected [video_id, sentence, [start, end]]")
                k = _video_key(e[0], corpus)
                if k is None or k not in pool_keys:
                    raise err(f"query {i}, extra positive {j}: video {e[0]!r} is not in the query's pool")
                plist.append(Positive(k, seconds(e[2], f"query {i}, extra positive {j}", k), e[1]))
            pools[m.query_id] = pool_keys
            positives[m.query_id] = plist
    if not pools:
        raise AnnotationError(p, "no query has a retrieval pool")
    return MVMRPools(p.stem, corpus, pools, positives, dict(join))


def write_mvmr_pools(path: str | Path, corpus: Corpus, pools: dict[str, list[str]],
                     extra: dict[str, list[Positive]]) -> None:
    """The authors' format, in seconds (``duration`` per video); a query without a pool gets an empty one."""
    out: dict[str, Any] = {}
    for vid, ms in corpus.moments_by_video().items():
        out[vid] = {"duration": corpus.videos[vid].duration,
                    "timestamps": [list(m.span) for m in ms], "sentences": [m.text for m in ms],
                    "pos_moments": [[[p.video_id, p.sentence, list(p.span)] for p in extra.get(m.query_id, [])]
                                    for m in ms],
                    "retrieval_pool": [pools.get(m.query_id, []) for m in ms]}
    write_json(Path(path), out)
