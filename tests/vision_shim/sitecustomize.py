"""Test-only: lets PyPI's torchvision (a CUDA build) be imported beside the CPU torch wheel.

Its C extension cannot load there, and torchvision's import then fails registering fake kernels for
operators that do not exist ("operator torchvision::nms does not exist"). Defining the schemas of the
operators it registers fakes for lets the pure-Python parts (models, transforms, and open_clip on top)
import; the C operators themselves (nms, roi_align) stay unavailable and are not used by the encoders.
Only tests/test_vision_backends.py's side run puts this folder on PYTHONPATH."""

import torch

_lib = torch.library.Library("torchvision", "DEF")
for _schema in (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, bool aligned) -> Tensor",
):
    _lib.define(_schema)
