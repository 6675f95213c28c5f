"""Training over several processes (``torchrun``): one global batch, its rows split across ranks.

Every rank draws the same global batch (the same seeded sampler) and computes the same loss on it, but
each encoder runs only on the rank's share of the rows: a family wraps its encoder calls in
:func:`sharded`, which runs the encoder on this rank's contiguous slice and all-gathers the outputs with
their gradients. So in-batch negatives, hard-negative mining inside a batch and MINUTE's Shared-Norm
see the whole global batch on every rank, exactly as in one process: negatives are gathered across
ranks (as CLIP-style training does), not drawn per rank, and 2 processes follow the same loss curve
as 1 process with the same global batch.

Gradients. The gather's backward all-reduces (sums) the gradient of the gathered tensor before taking
the rank's slice, and the trainer averages parameter gradients across ranks after ``backward``
(:meth:`World.average_gradients`). Together these give every rank the gradient of the one-process
loss for any nesting of sharded calls: a parameter used inside a sharded call gets W times its
rows' share on its rank, a parameter used after the gather gets the full gradient on every rank,
and the average over W ranks is the full gradient in both cases.

torch's ``DistributedDataParallel`` is not used: it synchronises gradients only for work done
through the wrapped module's ``forward``, and the families call their networks' sub-encoders
(``encode_queries``, ``encode_videos``) directly. The gradient average is one flattened all-reduce.

What is and is not identical to one process: the losses match within float tolerance, not bit for
bit, because matrix products over a slice of the rows may sum in another order, and the gradient
is summed across ranks in another order than inside one backward. Dropout masks are drawn per rank
from the same seed, so with dropout > 0 the two runs draw different masks: same distribution,
different numbers. With dropout 0 the curves agree to ~1e-7 (tests/test_distributed.py). Parameters whose
exact gradient is 0 (attention's key bias, modular pooling's bias: softmax is shift invariant) follow
Adam-normalised float noise, in one process as in several, so such weights drift apart without changing
any output.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from momentsearch.errors import ConfigError


@dataclass(frozen=True)
class World:
    """This process's place among the training processes (rank 0 of 1 without torchrun)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> World:
        """torchrun's RANK, WORLD_SIZE and LOCAL_RANK (1 process when unset)."""
        try:
            size = int(os.environ.get("WORLD_SIZE", "1"))
            rank = int(os.environ.get("RANK", "0"))
            local = int(os.environ.get("LOCAL_RANK", "0"))
        except ValueError as e:
            raise ConfigError(f"WORLD_SIZE / RANK / LOCAL_RANK must be integers (set by torchrun): {e}") from None
        if size < 1 or not 0 <= rank < size:
            raise ConfigError(f"RANK {rank} is not in a world of WORLD_SIZE {size}")
        return cls(rank, size, local)

    def init(self, device: torch.device) -> torch.device:
        """Join the process group (gloo on CPU, nccl on CUDA); returns the device this rank trains on
        (``cuda:LOCAL_RANK`` when the config asks for CUDA)."""
        if self.size == 1:
            return device
        if device.type == "cuda":
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            if "MASTER_ADDR" not in os.environ:
                raise ConfigError("WORLD_SIZE > 1 but MASTER_ADDR is unset: start several processes with torchrun")
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                    timeout=datetime.timedelta(minutes=30))
        _set_current(self)
        return device

    def broadcast_parameters(self, model: nn.Module) -> None:
        """Rank 0's weights on every rank (they agree already when seeded alike; this makes it certain)."""
        if self.size > 1:
            for t in model.state_dict().values():
                dist.broadcast(t, 0)

    def average_gradients(self, model: nn.Module) -> None:
        """Each parameter's gradient averaged over the ranks, in one flattened all-reduce."""
        if self.size == 1:
            return
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.size
        offset = 0
        for g in grads:
            g.copy_(flat[offset: offset + g.numel()].view_as(g))
            offset += g.numel()

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()

    def close(self) -> None:
        _set_current(World())
        if self.size > 1 and dist.is_initialized():
            dist.destroy_process_group()


_CURRENT = World()


def _set_current(world: World) -> None:
    global _CURRENT
    _CURRENT = world


def current_world() -> World:
    return _CURRENT


class _Gather(torch.autograd.Function):
    """All-gather of each rank's rows along dim 0 (uneven sizes allowed); backward sums the gathered
    gradient over ranks and returns this rank's rows."""

    @staticmethod
    def forward(ctx: Any, local: torch.Tensor, sizes: list[int], rank: int) -> torch.Tensor:  # type: ignore[override]
        ctx.sizes, ctx.rank = sizes, rank
        width = max(sizes)
        padded = local.new_zeros((width, *local.shape[1:]))
        padded[: len(local)] = local
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        return torch.cat([p[:n] for p, n in zip(parts, sizes, strict=True)])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        start = sum(ctx.sizes[: ctx.rank])
        return grad[start: start + ctx.sizes[ctx.rank]], None, None


def _rows(x: Any, a: int, b: int) -> Any:
    if isinstance(x, torch.Tensor):
        return x[a:b]
    if isinstance(x, (list, tuple)):
        return type(x)(_rows(t, a, b) for t in x)
    return x


def _gather(x: Any, sizes: list[int], rank: int) -> Any:
    if isinstance(x, torch.Tensor):
        return _Gather.apply(x, sizes, rank)
    if isinstance(x, (list, tuple)):
        return type(x)(_gather(t, sizes, rank) for t in x)
    raise TypeError(f"sharded: cannot gather a {type(x).__name__} (return tensors, or lists/tuples of them)")


def sharded(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` where every tensor in ``args`` (or in a list/tuple of them) has the batch's rows on
    dim 0: in one process the plain call; with several ranks, each runs ``fn`` on its contiguous share
    of the rows and the outputs (tensors, or lists/tuples of them) are all-gathered with gradients, so
    the caller sees the whole batch's outputs. Non-tensor arguments pass through. The row count is the
    first tensor's. With fewer rows than ranks, every rank runs the whole call."""
    world = _CURRENT
    if world.size == 1:
        return fn(*args)
    n = _first_len(args)
    if n < world.size:
        return fn(*args)
    sizes = [len(r) for r in torch.arange(n).tensor_split(world.size)]
    a = sum(sizes[: world.rank])
    return _gather(fn(*(_rows(x, a, a + sizes[world.rank]) for x in args)), sizes, world.rank)


def _first_len(args: Sequence[Any]) -> int:
    for x in args:
        if isinstance(x, torch.Tensor):
            return len(x)
        if isinstance(x, (list, tuple)) and x:
            return _first_len(x)
    raise TypeError("sharded: no tensor argument to split")


__all__ = ["World", "current_world", "sharded"]
