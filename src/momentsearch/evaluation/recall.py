"""VR, SVMR and VCMR recall@k at tIoU, with the conventions of TVR's official evaluation.

Those conventions, each tested:

* the list order is the ranking; scores are ignored; only the first ``max_predictions`` (100)
  entries of each list count;
* a moment prediction is a hit when it is on the ground-truth video and its tIoU (float32) with
  the ground truth is >= the threshold; a prediction on another video has tIoU 0;
* queries with >= 4 annotator spans (DiDeMo) count a prediction as a hit when it reaches the
  threshold against at least 2 of them; with fewer spans, against any one;
* SVMR first keeps only the predictions on the ground-truth video, then takes the top k of those;
* VR is a hit when the ground-truth video is in the top k; repeated videos count as they come;
* every ground-truth query must have a prediction entry (and no entry may name an unknown query);
* each number is a percentage rounded to two decimals.

Where TVR's script would crash (an empty prediction list, a ground-truth video missing from
``video2idx``) this counts a miss. Everything is vectorised over (queries, predictions, spans).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from momentsearch.data.corpus import Corpus
from momentsearch.errors import PredictionError
from momentsearch.evaluation.predictions import Submission
from momentsearch.search.ranked import DEFAULT_MAX_PREDICTIONS, RankedMoments
from momentsearch.search.tiou import temporal_iou

DEFAULT_IOU_THRESHOLDS = (0.3, 0.5, 0.7)
DEFAULT_KS = (1, 5, 10, 100)
MULTI_ANNOTATOR_MIN_SPANS = 4  # DiDeMo: queries with this many spans ...
MULTI_ANNOTATOR_MIN_HITS = 2  # ... need this many of them overlapped
NO_HIT = np.iinfo(np.int64).max


@dataclass
class GroundTruth:
    """Per query: the ground-truth video (index into a video list; -1 if unknown) and spans."""

    query_ids: list[str]
    video_idx: np.ndarray  # (Q,) int64
    spans: np.ndarray  # (Q, A, 2) float64, NaN padded
    n_spans: np.ndarray  # (Q,) int64
    query_types: list[str | None]

    @classmethod
    def from_corpus(cls, corpus: Corpus, video_ids: Sequence[str]) -> GroundTruth:
        index = {v: i for i, v in enumerate(video_ids)}
        ms = [m for m in corpus.moments if m.has_ground_truth]
        if not ms:
            raise PredictionError(f"{corpus.name}: no query has ground truth to evaluate against")
        a = max(len(m.spans) for m in ms)
        spans = np.full((len(ms), a, 2), np.nan)
        for i, m in enumerate(ms):
            spans[i, : len(m.spans)] = m.spans
        return cls(
            [m.query_id for m in ms],
            np.array([index.get(m.video_id, -1) for m in ms], np.int64),  # type: ignore[arg-type]
            spans,
            np.array([len(m.spans) for m in ms], np.int64),
            [m.query_type for m in ms],
        )


def align(pred: RankedMoments, gt: GroundTruth, task: str = "", strict: bool = True) -> RankedMoments:
    """Reorder prediction rows to the ground truth's query order; check that the ids match."""
    rows = pred.row_of()
    missing = [q for q in gt.query_ids if q not in rows]
    if missing:
        raise PredictionError(
            f"{task + ': ' if task else ''}{len(missing)} ground-truth queries have no prediction entry, "
            f"e.g. desc_id {missing[:5]}; every query must be predicted"
        )
    if strict and len(rows) != len(gt.query_ids):
        extra = sorted(set(rows) - set(gt.query_ids))
        raise PredictionError(
            f"{task + ': ' if task else ''}{len(extra)} prediction entries name queries that the ground truth "
            f"lacks, e.g. desc_id {extra[:5]}; is this the right ground-truth file?"
        )
    order = np.array([rows[q] for q in gt.query_ids], np.int64)
    return RankedMoments(
        list(gt.query_ids), pred.video_ids, pred.video_idx[order], pred.start[order], pred.end[order],
        pred.score[order],
    )


def hit_matrix(pred: RankedMoments, gt: GroundTruth, iou_thresholds: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(matched (Q, K) bool, correct (T, Q, K) bool) for aligned predictions."""
    matched = (pred.video_idx == gt.video_idx[:, None]) & (pred.video_idx >= 0)
    gs = gt.spans[:, None, :, 0]
    ge = gt.spans[:, None, :, 1]
    iou = temporal_iou(pred.start[:, :, None], pred.end[:, :, None], gs, ge)  # (Q, K, A)
    iou = np.where(matched[:, :, None], iou, np.float32(0))
    need = np.where(gt.n_spans >= MULTI_ANNOTATOR_MIN_SPANS, MULTI_ANNOTATOR_MIN_HITS, 1)[:, None]
    correct = np.empty((len(iou_thresholds),) + matched.shape, bool)
    with np.errstate(invalid="ignore"):
        for t, thr in enumerate(iou_thresholds):
            correct[t] = (iou >= np.float32(thr)).sum(axis=-1) >= need
    return matched, correct


def first_hit_rank(hits: np.ndarray) -> np.ndarray:
    """(Q, K) bool -> (Q,) 0-based rank of the first hit, NO_HIT where none."""
    if hits.shape[-1] == 0:
        return np.full(hits.shape[:-1], NO_HIT, np.int64)
    return np.where(hits.any(axis=-1), hits.argmax(axis=-1), NO_HIT)


def first_hit_rank_within(hits: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Rank of the first hit counting only the ``keep`` positions (SVMR's same-video filter)."""
    rank_in_kept = np.cumsum(keep, axis=-1) - 1
    return np.where(hits & keep, rank_in_kept, NO_HIT).min(axis=-1, initial=NO_HIT)


def recall_from_ranks(first: np.ndarray, ks: Sequence[int], mask: np.ndarray | None = None) -> dict[int, float]:
    """Percentage of queries (within ``mask``) whose first hit is in the top k, rounded to 2 decimals."""
    sel = first if mask is None else first[mask]
    if len(sel) == 0:
        return {k: float("nan") for k in ks}
    return {k: round(float(np.mean(sel < k)) * 100, 2) for k in ks}


def task_first_hits(
    task: str, pred: RankedMoments, gt: GroundTruth, iou_thresholds: Sequence[float]
) -> dict[str, np.ndarray]:
    """{"" (VR) or str(threshold): (Q,) first-hit ranks} for one task."""
    matched, correct = hit_matrix(pred, gt, iou_thresholds)
    if task == "VR":
        return {"": first_hit_rank(matched)}
    if task == "VCMR":
        return {str(t): first_hit_rank(correct[i]) for i, t in enumerate(iou_thresholds)}
    if task == "SVMR":
        return {str(t): first_hit_rank_within(correct[i], matched) for i, t in enumerate(iou_thresholds)}
    raise ValueError(f"unknown task {task!r}")


def _keys(task: str, thr: str, k: int, prefix: str = "") -> str:
    return f"{prefix}r{k}" if task == "VR" else f"{prefix}{thr}-r{k}"


def evaluate_task(
    task: str,
    pred: RankedMoments,
    gt: GroundTruth,
    iou_thresholds: Sequence[float] = DEFAULT_IOU_THRESHOLDS,
    ks: Sequence[int] = DEFAULT_KS,
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
    strict: bool = True,
    by_type: bool = False,
) -> tuple[dict[str, float], dict[str, object]]:
    """Metrics for one task keyed as TVR keys them ("0.5-r1"; "r1" for VR), and per-type metrics."""
    aligned = align(pred, gt, task, strict).truncate(max_predictions)
    firsts = task_first_hits(task, aligned, gt, iou_thresholds)
    metrics: dict[str, float] = {}
    for thr, first in firsts.items():
        for k, v in recall_from_ranks(first, ks).items():
            metrics[_keys(task, thr, k)] = v
    typed: dict[str, object] = {}
    if by_type:
        types = np.array([t or "" for t in gt.query_types])
        for dt in ("v", "t", "vt"):
            for thr, first in firsts.items():
                for k, v in recall_from_ranks(first, ks, types == dt).items():
                    typed[_keys(task, thr, k, f"{dt}-")] = v
        typed["desc_type_ratio"] = "v {} t {} vt {}".format(
            *[round(float(np.mean(types == t)) * 100, 2) for t in ("v", "t", "vt")]
        )
    return metrics, typed


def evaluate_submission(
    submission: Submission,
    corpus: Corpus,
    iou_thresholds: Sequence[float] = DEFAULT_IOU_THRESHOLDS,
    ks: Sequence[int] = DEFAULT_KS,
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
    strict: bool = True,
) -> dict[str, dict[str, object]]:
    """All tasks present in the submission, against the corpus' annotated moments.

    Per-type metrics (TVR's ``VCMR_by_type`` etc.) are added when every query has a TVR type.
    """
    out: dict[str, dict[str, object]] = {}
    typed_out: dict[str, dict[str, object]] = {}
    gt = GroundTruth.from_corpus(corpus, list(submission.video2idx))
    use_types = all(t in ("v", "t", "vt") for t in gt.query_types)
    for task in ("VCMR", "SVMR", "VR"):
        if task in submission.tasks:
            try:
                m, typed = evaluate_task(
                    task, submission.tasks[task], gt, iou_thresholds, ks, max_predictions, strict, use_types
                )
            except PredictionError as e:  # name the file; the message names the task and the queries
                where = f"{submission.source}: " if submission.source else ""
                raise PredictionError(f"{where}{e}") from None
            out[task] = dict(m)
            if use_types:
                typed_out[f"{task}_by_type"] = typed
    out.update(typed_out)
    return out


def evaluate_ranked(
    ranked: RankedMoments,
    corpus: Corpus,
    tasks: Sequence[str] = ("VCMR", "VR"),
    iou_thresholds: Sequence[float] = DEFAULT_IOU_THRESHOLDS,
    ks: Sequence[int] = DEFAULT_KS,
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
) -> dict[str, dict[str, float]]:
    """Evaluate one ranked moment list as the given tasks (SVMR from it keeps same-video entries)."""
    gt = GroundTruth.from_corpus(corpus, ranked.video_ids)
    return {
        t: evaluate_task(t, ranked, gt, iou_thresholds, ks, max_predictions)[0] for t in tasks
    }


PER_QUERY = {"VCMR": ((0.5, 0.7), (1, 10)), "VR": ((), (1, 10))}  # what per_query_hits records


def per_query_hits(ranked: Mapping[str, RankedMoments], corpus: Corpus) -> dict[str, dict[str, float]]:
    """Query id -> {"VCMR 0.5-r1": 100 x hit, ..., "VR r10": ...}: each query's own result, whose means over the
    queries are the split's recalls (what a two-level bootstrap over test queries resamples; issue 75)."""
    out: dict[str, dict[str, float]] = {}
    for task, (thresholds, ks) in PER_QUERY.items():
        pred = ranked[task]
        gt = GroundTruth.from_corpus(corpus, pred.video_ids)
        aligned = align(pred, gt, task).truncate(DEFAULT_MAX_PREDICTIONS)
        for thr, first in task_first_hits(task, aligned, gt, thresholds or (0.5,)).items():
            for k in ks:
                name = f"VR r{k}" if task == "VR" else f"VCMR {thr}-r{k}"
                for q, rank in zip(aligned.query_ids, first, strict=True):
                    out.setdefault(q, {})[name] = 100.0 * float(rank < k)
    return out
