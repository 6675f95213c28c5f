"""Generation streamed to disk: each video's records and features are written as soon as it is made, so
memory stays that of a chunk of videos whatever the corpus size (a million ``large`` videos: about 20 GB
on disk, where holding them as one :class:`Corpus` would take about 35 GB of memory).

Videos are made in chunks of :data:`CHUNK`, by ``workers`` processes when more than one (each video is
drawn from its own seeded stream, so the files are byte for byte the same for any number of workers),
and written in order by the calling process: ``corpus.jsonl`` (each video's line, then its moments'),
TVR's files, and the feature files.
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from momentsearch.data.corpus import Moment, Subtitle, Video, summarize
from momentsearch.data.loaders.jsonl import header_record, moment_record, video_record
from momentsearch.data.synthetic.concepts import Inventory
from momentsearch.data.synthetic.config import SyntheticConfig
from momentsearch.data.synthetic.generator import SyntheticVideo, World, sample_video, video_features
from momentsearch.fileio import json_line, write_json
from momentsearch.processes import die_with_parent

CHUNK = 256  # videos a worker makes at a time

Made = tuple[Video, list[Moment], np.ndarray, np.ndarray | None]  # moments numbered from 0 in each video
_world: tuple[SyntheticConfig, World] | None = None  # one per process


def to_corpus_parts(cfg: SyntheticConfig, video: SyntheticVideo, split: str) -> tuple[Video, list[Moment]]:
    """The video and its captions' moments (numbered from 0: :meth:`CorpusStream.add` numbers them on)."""
    meta = {"scene": video.scene, "subject": video.subject, "events": [e.to_dict() for e in video.events],
            "n_distractors": len(video.distractors)}
    subs = tuple(Subtitle(st, ed, text) for st, ed, text, _, _ in video.subtitles)
    v = Video(video.video_id, video.duration, split, cfg.clip_length, subs, meta)
    by_id = {e.event_id: e for e in video.events}
    moments = []
    for i, cap in enumerate(video.captions):
        ev = by_id[cap.event_id]
        moments.append(Moment(str(i), cap.text, video.video_id, ((ev.start, ev.end),), split,
                              "vt" if ev.mentioned else "v", {"event": ev.event_id, "concepts": cap.concepts}))
    return v, moments


def _make(job: tuple[SyntheticConfig, list[str], int]) -> list[Made]:
    global _world
    cfg, splits, first = job
    if _world is None or _world[0] != cfg:
        _world = (cfg, World(cfg, Inventory()))
    world = _world[1]
    out = []
    for i, split in enumerate(splits, start=first):
        sv = sample_video(cfg, world, i)
        v, ms = to_corpus_parts(cfg, sv, split)
        vis, sub = video_features(cfg, world, sv)
        out.append((v, ms, vis.astype(np.float16), None if sub is None else sub.astype(np.float16)))
    return out


def made_videos(cfg: SyntheticConfig, splits: list[str], workers: int = 1) -> Iterator[Made]:
    """Every video of ``cfg`` in index order, made ``CHUNK`` at a time by ``workers`` processes."""
    jobs = ((cfg, splits[a: a + CHUNK], a) for a in range(0, cfg.n_videos, CHUNK))
    if workers <= 1:
        for job in jobs:
            yield from _make(job)
        return
    with multiprocessing.get_context("spawn").Pool(workers, die_with_parent, (os.getpid(),)) as pool:
        pending: collections.deque = collections.deque()
        for job in jobs:  # at most 2 chunks a worker in flight: made videos never pile up ahead of the writer
            pending.append(pool.apply_async(_make, (job,)))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def tvr_release_record(m: Moment, duration: float) -> dict[str, Any]:
    """``m`` as a line of TVR's ``tvr_<split>_release.jsonl``."""
    return {"vid_name": m.video_id, "duration": duration, "ts": list(m.span), "desc": m.text, "type": m.query_type,
            "desc_id": int(m.query_id)}


def tvr_subtitles_record(v: Video) -> dict[str, Any]:
    """``v``'s subtitles as a line of TVQA's ``tvqa_preprocessed_subtitles.jsonl``."""
    return {"vid_name": v.video_id, "sub": [{"start": s.start, "end": s.end, "text": s.text} for s in v.subtitles]}


class CorpusStream:
    """``corpus.jsonl`` and TVR's files written a video at a time, with the counts ``Corpus.stats`` gives."""

    def __init__(self, out: Path, name: str):
        (out / "tvr").mkdir(parents=True, exist_ok=True)
        self.tvr = out / "tvr"
        self.corpus = (out / "corpus.jsonl").open("w", encoding="utf-8")
        self.subs = (self.tvr / "tvqa_preprocessed_subtitles.jsonl").open("w", encoding="utf-8")
        self.release: dict[str, IO[str]] = {}
        self.video2dur: dict[str, dict[str, list[float | int]]] = {}
        self.durations: list[float] = []
        self.lengths: list[float] = []
        self.splits: dict[str, dict[str, int]] = {}
        self.n_queries = 0
        self.corpus.write(json_line(header_record(name)))

    def add(self, v: Video, moments: list[Moment]) -> list[Moment]:
        """Write ``v`` and its moments, numbered on from the moments before; returns them as numbered."""
        ms = [dataclasses.replace(m, query_id=str(self.n_queries + i)) for i, m in enumerate(moments)]
        split = v.split or "all"
        self.video2dur.setdefault(split, {})[v.video_id] = [v.duration, len(self.durations)]
        self.durations.append(v.duration)
        self._count(v.split, "n_videos")
        self.corpus.write(json_line(video_record(v)))
        if v.subtitles:
            self.subs.write(json_line(tvr_subtitles_record(v)))
        for m in ms:
            self.corpus.write(json_line(moment_record(m)))
            self.lengths.extend(ed - st for st, ed in m.spans)
            self._count(m.split, "n_queries")
            if m.split not in self.release:
                self.release[m.split] = (self.tvr / f"tvr_{m.split}_release.jsonl").open("w", encoding="utf-8")
            self.release[m.split].write(json_line(tvr_release_record(m, v.duration)))
        self.n_queries += len(ms)
        return ms

    def _count(self, split: str | None, key: str) -> None:
        if split is not None:
            self.splits.setdefault(split, {"n_queries": 0, "n_videos": 0})[key] += 1

    def close(self) -> dict[str, Any]:
        """Close the files; the stats ``benchmark.yaml`` records."""
        for fh in [self.corpus, self.subs, *self.release.values()]:
            fh.close()
        for split in set(self.splits) - set(self.release):  # a split without moments: an empty file, as before
            (self.tvr / f"tvr_{split}_release.jsonl").write_text("")
        write_json(self.tvr / "tvr_video2dur_idx.json", self.video2dur, indent=None)
        return {"n_queries": self.n_queries, "n_videos": len(self.durations),
                "splits": {s: self.splits[s] for s in sorted(self.splits)},
                "video_duration_s": summarize(self.durations), "span_length_s": summarize(self.lengths)}
