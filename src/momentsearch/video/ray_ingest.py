"""Distributed ingest on Ray: decoding and encoding spread over a pool of Ray actors.

Each actor holds one visual encoder (weights loaded once per actor, not per video) and runs
:class:`~momentsearch.video.worker.VideoWorker` on one video at a time; ``ray.util.ActorPool`` hands the
videos out and returns the features as each finishes. The ingest process writes them (the files, the
journal, the manifest), so a Ray ingest resumes, grows and fails per file exactly as a serial one, and
its features are the serial ingest's: the same code on the same frames.

* ``ray_address="local"`` starts a Ray on this machine with ``ray_workers`` CPUs (default: all) and
  stops it afterwards; any other address (``auto``, ``ray://head:10001``, ``head:6379``) joins that
  cluster, whose nodes need momentsearch installed and the videos at the same path (a shared filesystem:
  actors read the files by path).
* A video whose actor dies (a crash inside a codec) or is stuck past its time budget is reported and
  the actor replaced; the other videos go on.
* Each actor asks Ray for ``threads`` CPUs (default 1; or one GPU with ``--encoder-device cuda``) and runs
  torch on that many threads. Torch encoders' float results depend on the thread count (MiniLM's
  subtitle vectors differ by ~1e-7 between 1 and 2 threads), so the features are bit-identical to a
  serial ingest run with the same ``--threads`` (tested); the builtin encoder is NumPy and identical at any.

Ray is an optional dependency (``pip install 'momentsearch[ray]'``); the serial ingest never imports it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.video.decode import DecodeLimits
from momentsearch.video.encoders import VisualEncoder, create_encoder
from momentsearch.video.worker import Encoded, VideoWorker


class _Actor:
    """One Ray actor: an encoder, made once, and the per-video work."""

    def __init__(self, encoder: str | VisualEncoder, options: dict[str, Any] | None,
                 settings: tuple[Any, ...], threads: int):
        try:
            import torch

            torch.set_num_threads(threads)
        except ImportError:  # the builtin encoder needs no torch
            pass
        enc = encoder if isinstance(encoder, VisualEncoder) else create_encoder(encoder, **(options or {}))
        self.worker = VideoWorker(enc, *settings)

    def run(self, video_id: str, path: str, sidecars: list[str]) -> tuple[str, Encoded]:
        return video_id, self.worker.run(Path(path), [Path(s) for s in sidecars])


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'momentsearch[ray]' (or pip install ray)") from None
    return ray


def check_reachable(address: str, timeout: float = 5.0) -> None:
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


STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")  # Ray's own words, 2.x


def start_local(ray: Any, workers: int | None, tries: int = 3) -> None:
    """Start a local Ray node. Ray gives its raylet a fixed 30 s to come up and raises a bare Exception past
    that, and waits a fixed time for its GCS server's port file (a RuntimeError "Timed out waiting for file"),
    which a loaded machine can hit; the half-started node is shut down and the start tried again."""
    for attempt in range(1, tries + 1):
        try:
            # address="local": a node of its own even where RAY_ADDRESS or a `ray start` cluster would be found
            ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            return
        except Exception as e:  # Ray raises Exception itself for this one
            if not any(m in str(e) for m in STARTUP_TIMEOUTS):
                raise
            ray.shutdown()
            if attempt == tries:
                raise ConfigError(f"--ray local: Ray's local node did not start within Ray's 30 s, {tries} times "
                                  f"({e}); the machine may be overloaded: retry when it is quieter, or start one "
                                  "with `ray start --head` and pass its address to --ray") from None


STUCK_GRACE_S = 300.0  # past DecodeLimits.max_seconds, a video still not done is stuck inside a native call


def _pooled(ray: Any, new_actor: Callable[[], Any], jobs: Sequence[tuple[str, Path, Sequence[Path]]], n: int,
            timeout: float) -> Iterator[tuple[str, Encoded]]:
    """Each job on one of ``n`` actors, results as they finish. An actor that dies on a video (a crash inside
    a codec) or is still on it after ``timeout`` seconds (killed) costs that video alone: it is reported
    and a new actor takes the actor's place."""
    from ray.exceptions import RayError

    todo = list(jobs)[::-1]
    idle = [new_actor() for _ in range(n)]
    running: dict[Any, tuple[Any, tuple[str, Path, Path | None], float]] = {}
    try:
        while todo or running:
            while idle and todo:
                actor, job = idle.pop(), todo.pop()
                running[actor.run.remote(job[0], str(job[1]), [str(x) for x in job[2]])] = (actor, job, time.monotonic())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in ready:
                actor, job, _t = running.pop(ref)
                try:
                    result = ray.get(ref)
                except RayError as e:
                    ray.kill(actor)
                    idle.append(new_actor())
                    why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
                    yield job[0], Encoded(error=f"{job[1]}: the Ray worker decoding it died ({type(e).__name__}: {why}); "
                                                "the file is probably damaged", unexpected=True)
                    continue
                idle.append(actor)
                yield result
            now = time.monotonic()
            for ref, (actor, job, started) in list(running.items()):
                if now - started > timeout:
                    del running[ref]
                    ray.kill(actor)
                    idle.append(new_actor())
                    yield job[0], Encoded(error=f"{job[1]}: not done after {timeout:.0f} s (DecodeLimits.max_seconds + "
                                                f"{STUCK_GRACE_S:.0f} s): stuck inside the decoder; stopped")
    finally:
        for actor, *_ in running.values():
            ray.kill(actor)
        for actor in idle:
            ray.kill(actor)


def ray_connect(address: str, workers: int | None = None) -> tuple[Any, bool]:
    """Ray, connected to ``address`` (``local``: a node started here with ``workers`` CPUs; ``auto``, ``HOST:PORT`` or
    ``ray://HOST:PORT``: a running cluster), and whether this call connected it (the caller then shuts it down).
    Already connected: as it is."""
    ray = ray_module()
    started = not ray.is_initialized()
    if started:
        if address == "local":
            start_local(ray, workers)
        else:
            check_reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            except ConnectionError as e:
                raise ConfigError(f"--ray {address}: no Ray cluster answers there ({e})") from None
    return ray, started


def ray_results(jobs: Sequence[tuple[str, Path, Sequence[Path]]], encoder: str | VisualEncoder,
                options: dict[str, Any] | None, settings: tuple[Any, ...], address: str,
                workers: int | None = None, threads: int = 1) -> Iterator[tuple[str, Encoded]]:
    """(video id, what its worker gave) for each job ``(id, video file, sidecar files)``, as they finish."""
    if not jobs:
        return
    ray, started = ray_connect(address, workers)
    try:
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
        gpu = str((options or {}).get("device", "cpu")).startswith("cuda")
        actor_cls = ray.remote(num_cpus=0 if gpu else threads, num_gpus=1 if gpu else 0)(_Actor)
        encoder_ref = ray.put(encoder)
        limits = settings[3] or DecodeLimits()  # (clip_seconds, fps, batch_clips, limits), as ingest passes them
        yield from _pooled(ray, lambda: actor_cls.remote(encoder_ref, options, settings, threads), jobs,
                           min(n, len(jobs)), limits.max_seconds + STUCK_GRACE_S)
    finally:
        if started:
            ray.shutdown()
