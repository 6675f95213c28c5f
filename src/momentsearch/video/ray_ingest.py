"""Distributed ingest on Ray: decoding and encoding spread over a pool of Ray actors.

Each actor holds one visual encoder (weights loaded once per actor, not per video) and runs
:class:`~momentsearch.video.ingest.VideoWorker` on one video at a time; ``ray.util.ActorPool`` hands the
videos out and returns the features as each finishes. The ingest process writes them (the files, the
journal, the manifest), so a Ray ingest resumes, grows and fails per file exactly as a serial one, and
its features are the serial ingest's: the same code on the same frames.

* ``ray_address="local"`` starts a Ray on this machine with ``ray_workers`` CPUs (default: all) and
  stops it afterwards; any other address (``auto``, ``ray://head:10001``, ``head:6379``) joins that
  cluster, whose nodes need momentsearch installed and the videos at the same path (a shared filesystem:
  actors read the files by path).
* Each actor asks Ray for ``threads`` CPUs (default 1; or one GPU with ``--encoder-device cuda``) and runs
  torch on that many threads. Torch encoders' float results depend on the thread count (MiniLM's
  subtitle vectors differ by ~1e-7 between 1 and 2 threads), so the features are bit-identical to a
  serial ingest run with the same ``--threads`` (tested); the builtin encoder is NumPy and identical at any.

Ray is an optional dependency (``pip install 'momentsearch[ray]'``); the serial ingest never imports it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.video.encoders import VisualEncoder, create_encoder
from momentsearch.video.ingest import Encoded, VideoWorker


class _Actor:
    """One Ray actor: an encoder, made once, and the per-video work."""

    def __init__(self, encoder: str | VisualEncoder, options: dict[str, Any] | None,
                 settings: tuple[float, float, int], threads: int):
        try:
            import torch

            torch.set_num_threads(threads)
        except ImportError:  # the builtin encoder needs no torch
            pass
        enc = encoder if isinstance(encoder, VisualEncoder) else create_encoder(encoder, **(options or {}))
        self.worker = VideoWorker(enc, *settings)

    def run(self, video_id: str, path: str, subtitles: str | None) -> tuple[str, Encoded]:
        return video_id, self.worker.run(Path(path), Path(subtitles) if subtitles else None)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'momentsearch[ray]' (or pip install ray)") from None
    return ray


def _reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` or ``ray://host:port`` address must accept a TCP connection: Ray itself retries an
    unreachable head for minutes before it gives up."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and other forms Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"--ray {address}: no Ray cluster answers there ({e})") from None


def start_local(ray: Any, workers: int | None, tries: int = 3) -> None:
    """Start a local Ray node. Ray gives its raylet a fixed 30 s to come up and raises a bare Exception past
    that, which a loaded machine can hit; the half-started node is shut down and the start tried again."""
    for attempt in range(1, tries + 1):
        try:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
            return
        except Exception as e:  # Ray raises Exception itself for this one
            if "timed out during startup" not in str(e):
                raise
            ray.shutdown()
            if attempt == tries:
                raise ConfigError(f"--ray local: Ray's local node did not start within Ray's 30 s, {tries} times "
                                  f"({e}); the machine may be overloaded: retry when it is quieter, or start one "
                                  "with `ray start --head` and pass its address to --ray") from None


def ray_results(jobs: Sequence[tuple[str, Path, Path | None]], encoder: str | VisualEncoder,
                options: dict[str, Any] | None, settings: tuple[float, float, int], address: str,
                workers: int | None = None, threads: int = 1) -> Iterator[tuple[str, Encoded]]:
    """(video id, what its worker gave) for each job ``(id, video file, subtitle file)``, as they finish."""
    if not jobs:
        return
    ray = _ray()
    from ray.util import ActorPool

    started = not ray.is_initialized()
    if started:
        if address == "local":
            start_local(ray, workers)
        else:
            _reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            except ConnectionError as e:
                raise ConfigError(f"--ray {address}: no Ray cluster answers there ({e})") from None
    try:
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
        gpu = str((options or {}).get("device", "cpu")).startswith("cuda")
        actor_cls = ray.remote(num_cpus=0 if gpu else threads, num_gpus=1 if gpu else 0)(_Actor)
        encoder_ref = ray.put(encoder)
        actors = [actor_cls.remote(encoder_ref, options, settings, threads) for _ in range(min(n, len(jobs)))]
        pool = ActorPool(actors)
        yield from pool.map_unordered(lambda a, job: a.run.remote(job[0], str(job[1]), job[2] and str(job[2])),
                                      list(jobs))
        for a in actors:
            ray.kill(a)
    finally:
        if started:
            ray.shutdown()
