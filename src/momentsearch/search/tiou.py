"""Temporal IoU, in float32 as TVR's official evaluation computes it.

TVR divides the intersection by the hull ``max(ends) - min(starts)`` rather than by the union of
lengths; the two agree whenever the spans overlap, and the IoU is 0 otherwise, so this is the
usual tIoU. A zero-length hull gives 0. Inputs broadcast; NaN inputs give NaN (never a hit).
"""

from __future__ import annotations

import numpy as np


def temporal_iou(pred_st: np.ndarray, pred_ed: np.ndarray, gt_st: np.ndarray, gt_ed: np.ndarray) -> np.ndarray:
    """tIoU of spans [pred_st, pred_ed] and [gt_st, gt_ed], broadcast, float32."""
    ps = np.asarray(pred_st, dtype=np.float32)
    pe = np.asarray(pred_ed, dtype=np.float32)
    gs = np.asarray(gt_st, dtype=np.float32)
    ge = np.asarray(gt_ed, dtype=np.float32)
    inter = np.maximum(np.float32(0), np.minimum(pe, ge) - np.maximum(ps, gs))
    hull = np.maximum(pe, ge) - np.minimum(ps, gs)
    out = np.zeros(np.broadcast(inter, hull).shape, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        np.divide(inter, hull, out=out, where=hull != 0)
        out[np.isnan(inter) | np.isnan(hull)] = np.nan
    return out
