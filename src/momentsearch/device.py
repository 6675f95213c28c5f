"""Devices: ``auto | cpu | cuda[:n]``, autocast on CUDA, and torch's process-wide settings applied
only for the duration of a call (restored afterwards), never behind the caller's back."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from momentsearch.errors import ConfigError


def resolve_device(spec: str = "auto") -> torch.device:
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(spec)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {spec!r}: this torch build or machine has no CUDA "
                              f"(torch {torch.__version__}); use device: cpu or auto")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device {spec!r}: only {torch.cuda.device_count()} CUDA device(s)")
    return dev


def autocast_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``amp`` on ``device``; None: full precision (always on the CPU)."""
    if device.type != "cuda" or amp == "none":
        return None
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if amp == "bf16" else torch.float16


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[None]:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


@contextlib.contextmanager
def torch_settings(num_threads: int = 0, deterministic: bool | None = None,
                   device: torch.device | None = None) -> Iterator[None]:
    """Set torch's thread count (0: leave it) and deterministic mode (None: leave it) for the block,
    then restore what was there. On CUDA, deterministic mode warns rather than fails where an op
    has no deterministic kernel, and cuBLAS gets the workspace setting it needs."""
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    if num_threads > 0:
        torch.set_num_threads(num_threads)
    if deterministic is not None:
        on_cuda = device is not None and device.type == "cuda"
        if deterministic and on_cuda:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(deterministic, warn_only=on_cuda)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
