"""Evaluation: VR/SVMR/VCMR recall with TVR's conventions, TVR submission files, multi-positive recall,
instance-based bounds."""

from momentsearch.evaluation.bounds import instance_bounds
from momentsearch.evaluation.multipositive import multi_positive_recall
from momentsearch.evaluation.predictions import TASKS, RankedMoments, Submission
from momentsearch.evaluation.recall import (
    DEFAULT_IOU_THRESHOLDS,
    DEFAULT_KS,
    GroundTruth,
    evaluate_ranked,
    evaluate_submission,
)
from momentsearch.search.tiou import temporal_iou

__all__ = [
    "DEFAULT_IOU_THRESHOLDS",
    "DEFAULT_KS",
    "GroundTruth",
    "RankedMoments",
    "Submission",
    "TASKS",
    "evaluate_ranked",
    "evaluate_submission",
    "instance_bounds",
    "multi_positive_recall",
    "temporal_iou",
]
