"""``ingest``: a folder of videos -> a corpus folder (:mod:`momentsearch.data.corpus_folder`).

Every file under the folder (recursively; hidden files and sidecars — ``.srt``, ``.vtt``, ``.json`` — aside)
is decoded with PyAV, streaming, clip by clip (:func:`~momentsearch.video.decode.clip_frames`), and encoded
by the chosen visual encoder. What is said in it (:mod:`momentsearch.data.transcripts`: an SRT or WebVTT
file with the same stem, else a whisper-style JSON transcript, else a text subtitle stream inside the file)
is stored as ``transcripts/<id>.json`` and, aligned to the clips, encoded with MiniLM into the subtitle
stream. Files that cannot be decoded are reported and skipped; still images too, unless ``stills``
takes each as a one-clip item. A speech source that cannot be read is a warning (file and line) and the
video is ingested without it.

**Heard and read** (issue 72): with ``speech`` (``auto``/``pocketsphinx``/``whisper:PATH``), a video with
none of those sources has its audio track recognised (:mod:`momentsearch.video.speech`), and the cues are
stored as its transcript with their source (``kind`` ``asr:pocketsphinx``); with ``read_text`` the text on
screen is read (:mod:`momentsearch.video.written`) into ``written/<id>.json`` and the ``written`` stream. A
damaged audio track, or a recogniser failing on one file, is a warning: the video is kept. Each entry records
the settings it was heard and read with (``listen``); a later ingest with other settings does it again.

**Ids.** A video's id is its path relative to the folder, without its extension (``cats/a.mp4`` ->
``cats/a``). Where two files would share an id (``a.mp4`` and ``a.mkv``), each takes its full
relative name instead (``a.mp4``, ``a.mkv``), so no file hides another.

**Resuming and growing.** Each finished video's features are renamed into place and a line is
appended to ``ingest.journal.jsonl``; a killed ingest, run again, keeps what the journal and the
manifest hold and goes on. Running ingest again on a grown folder encodes only new files and files
whose size or modification time changed (or whose subtitle file did); files that are gone leave the
corpus. The manifest is written last, atomically.

**On a Ray cluster** (``ray_address``; :mod:`momentsearch.video.ray_ingest`) the decoding and encoding of
each video runs on Ray actors, each holding one encoder, and this process writes what they return
exactly as above: same files, journal, resume and manifest; the features are the serial ingest's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from momentsearch.data.corpus_folder import MANIFEST, CorpusFolder, CorpusManifest
from momentsearch.data.features import check_clip_array, checksum, h5_key
from momentsearch.data.transcripts import SIDECAR_SUFFIXES, TRANSCRIPTS, WRITTEN, Transcript, sidecars
from momentsearch.errors import ConfigError, CorpusFolderError, MomentSearchError
from momentsearch.fileio import atomic_path, make_folder
from momentsearch.video.decode import DecodeLimits
from momentsearch.video.encoders import VisualEncoder, create_encoder, describe, same_encoder
from momentsearch.video.worker import SUBTITLE_ENCODER, Encoded, VideoWorker

JOURNAL = "ingest.journal.jsonl"
LISTEN_OFF = {"speech": "none", "read_text": False}  # what an entry made without --speech / --read-text records


@dataclass
class IngestReport:
    corpus: Path
    encoded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)  # kept videos whose speech source was bad
    video_seconds: float = 0.0  # of the videos encoded now
    wall_seconds: float = 0.0

    def summary(self) -> str:
        rate = self.video_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0
        lines = [f"corpus {self.corpus}: {len(self.encoded)} video(s) encoded ({self.video_seconds:.0f} s of video, "
                 f"{rate:.1f} video-s/s), {len(self.kept)} kept as they were, {len(self.removed)} removed, "
                 f"{len(self.failures)} skipped" + (f", {len(self.warnings)} warning(s)" if self.warnings else "")]
        lines += [f"  skipped {f['path']}: {f['error']}" for f in self.failures]
        lines += [f"  warning {w['path']}: {w['warning']}" for w in self.warnings]
        return "\n".join(lines)


def scan(videos_dir: Path, exclude: Path | None = None) -> dict[str, Path]:
    """id -> file, by the id policy above (sorted by id)."""
    files = []
    for dirpath, dirnames, filenames in os.walk(videos_dir):
        d = Path(dirpath)
        dirnames[:] = sorted(n for n in dirnames if not n.startswith(".") and (
            exclude is None or (d / n).resolve() != exclude))
        files += [d / n for n in sorted(filenames)
                  if not n.startswith(".") and Path(n).suffix.lower() not in SIDECAR_SUFFIXES]
    by_stem: dict[str, list[Path]] = {}
    for f in files:
        by_stem.setdefault(f.relative_to(videos_dir).with_suffix("").as_posix(), []).append(f)
    out = {}
    for stem, group in by_stem.items():
        for f in group:
            out[stem if len(group) == 1 else f.relative_to(videos_dir).as_posix()] = f
    return dict(sorted(out.items()))


def _signature(path: Path, videos_dir: Path) -> dict[str, Any]:
    st = path.stat()
    sig: dict[str, Any] = {"path": path.relative_to(videos_dir).as_posix(), "size": st.st_size,
                           "mtime_ns": st.st_mtime_ns, "sidecars": []}
    for f in sidecars(path):
        fst = f.stat()
        sig["sidecars"].append({"path": f.relative_to(videos_dir).as_posix(), "size": fst.st_size,
                                "mtime_ns": fst.st_mtime_ns})
    return sig


def _same_source(entry: dict[str, Any], sig: dict[str, Any], listen: dict[str, Any]) -> bool:
    if "transcript" not in entry:  # ingested before transcripts were stored: read what is said again
        return False
    if entry.get("listen", LISTEN_OFF) != listen:  # asked to recognise speech or read text differently now
        return False
    return entry.get("sidecars") == sig["sidecars"] and all(entry.get(k) == sig[k] for k in ("path", "size", "mtime_ns"))


def _write_array(folder: Path, video_id: str, arr: np.ndarray) -> int:
    stored = check_clip_array(np.asarray(arr), None, f"{folder}/{video_id} (being written)").astype(np.float16)
    if not np.isfinite(stored).all():
        raise MomentSearchError(f"{folder}/{video_id}: features overflow float16")
    with atomic_path(folder / f"{h5_key(video_id)}.npy") as tmp, open(tmp, "wb") as fh:
        np.save(fh, stored)
    return checksum(stored)


def _write_transcript(folder: Path, video_id: str, said: Transcript) -> int:
    data = json.dumps(said.to_json(), ensure_ascii=False).encode("utf-8")
    with atomic_path(folder / f"{h5_key(video_id)}.json") as tmp:
        tmp.write_bytes(data)
    return zlib.crc32(data)


def _torch_threads(n: int) -> contextlib.AbstractContextManager[None]:
    """torch on ``n`` threads for the block, restored after (device.torch_settings); no torch import at 0."""
    if n <= 0:
        return contextlib.nullcontext()
    from momentsearch.device import torch_settings

    return torch_settings(n)


def _utc_now() -> str:
    """When a video was encoded, as the corpus records it (``ingested_at``): ``2026-11-26T08:55:03Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _changed(path: Path, sig: dict[str, Any]) -> str | None:
    """Why a file read as ``sig`` cannot be kept: it changed (or went) while it was read; else None."""
    try:
        st = path.stat()
    except OSError as e:
        return f"{path}: gone while it was read ({e.strerror or e}); run ingest again"
    if (st.st_size, st.st_mtime_ns) != (sig["size"], sig["mtime_ns"]):
        return (f"{path}: changed while it was read (size {sig['size']} -> {st.st_size} bytes); run ingest again "
                "once it is complete")
    return None


def _previous_state(out: Path, identity: dict[str, Any], clip_seconds: float, fps: float) -> dict[str, dict[str, Any]]:
    """Entries already done (manifest, then journal), the old manifest checked against this run's settings."""
    entries: dict[str, dict[str, Any]] = {}
    if (out / MANIFEST).is_file():
        old = CorpusFolder.open(out).manifest
        if old.source is None:
            raise CorpusFolderError(f"{out}: holds a corpus written from a dataset, not ingested; use another --out")
        if not same_encoder(old.encoder, identity) or old.clip_seconds != clip_seconds or old.fps != fps:
            raise CorpusFolderError(
                f"{out}: this corpus was made by {describe(old.encoder)} at {old.clip_seconds} s clips, "
                f"{old.fps} fps; this ingest asks for {describe(identity)} at {clip_seconds} s, {fps} fps. "
                "Use another --out, or the corpus's settings")
        entries = {v["id"]: v for v in old.videos}
    journal = out / JOURNAL
    if journal.is_file():
        for line in journal.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # the line a killed ingest was writing
            if isinstance(rec, dict) and rec.get("settings") not in (None, [identity, clip_seconds, fps]):
                raise CorpusFolderError(f"{journal}: an unfinished ingest with other settings "
                                        f"({describe(rec['settings'][0])}); finish it with those, or delete {out}")
            if isinstance(rec, dict) and isinstance(rec.get("video"), dict) and "id" in rec["video"]:
                entries[rec["video"]["id"]] = rec["video"]
    return entries


def ingest(videos_dir: str | Path, out: str | Path, encoder: str | VisualEncoder = "builtin",
           clip_seconds: float = 2.0, fps: float = 2.0, encoder_options: dict[str, Any] | None = None,
           batch_clips: int = 16, progress: bool = True, ray_address: str | None = None,
           ray_workers: int | None = None, threads: int = 0, limits: DecodeLimits | None = None,
           stills: bool = False, speech: str = "none", read_text: bool = False,
           ocr_weights: str | None = None) -> IngestReport:
    """Ingest (or update) ``out`` from ``videos_dir``; returns what was done, failures included.
    ``ray_address``: spread decoding and encoding over Ray (``"local"``: a Ray started here with
    ``ray_workers`` workers, default one per core; else a cluster's address, e.g. ``ray://head:10001``
    or ``auto``), with ``ray_workers`` actors (default: one per CPU of the cluster). ``threads``: torch
    threads per encoding process (0: torch's default here, 1 per Ray actor); torch encoders' float results
    depend on it, so a serial and a Ray ingest give bit-identical features at the same ``threads``.
    ``limits``: each file's decoding budget (:class:`~momentsearch.video.decode.DecodeLimits`). A file that
    fails, or changes while it is read, is reported in ``failures`` and the rest is ingested. ``stills``: take
    still images (JPEG, PNG, a one-frame GIF) as one-clip items instead of skipping them."""
    t0 = time.perf_counter()
    src, dst = Path(videos_dir), Path(out)
    if not src.is_dir():
        raise CorpusFolderError(f"{src}: not a folder of videos")
    if not (clip_seconds > 0 and fps > 0 and clip_seconds * fps >= 1 - 1e-9):
        raise CorpusFolderError(f"--clip-seconds {clip_seconds} and --fps {fps}: both must be > 0, with at least one "
                                "frame per clip (clip_seconds x fps >= 1)")
    if threads < 0:
        raise CorpusFolderError(f"threads must be >= 0, got {threads}")
    if ray_workers is not None and ray_workers < 1:
        raise ConfigError(f"--ray-workers must be >= 1, got {ray_workers}")
    listen = {"speech": speech, "read_text": bool(read_text)}
    hearing = _check_listening(speech, read_text, ocr_weights)
    enc = encoder if isinstance(encoder, VisualEncoder) else create_encoder(encoder, **(encoder_options or {}))
    identity = enc.identity()
    make_folder(dst, dst)
    entries = _previous_state(dst, identity, clip_seconds, fps)
    files = scan(src, exclude=dst.resolve())
    report = IngestReport(dst)
    vis_dir, sub_dir, said_dir = dst / "features" / "visual", dst / "features" / "subtitle", dst / TRANSCRIPTS
    wr_dir, read_dir = dst / "features" / WRITTEN, dst / WRITTEN
    make_folder(vis_dir, vis_dir)
    todo, videos = [], {}
    for vid, path in files.items():
        try:
            sig = _signature(path, src)
        except OSError as e:  # gone since the folder was listed, or unreadable
            report.failures.append({"path": path.relative_to(src).as_posix(), "size": None, "mtime_ns": None,
                                    "error": f"{path}: cannot be read ({e.strerror or e})"})
            continue
        e = entries.get(vid)
        if e is not None and _same_source(e, sig, listen) and (vis_dir / f"{h5_key(vid)}.npy").is_file():
            videos[vid] = e
            report.kept.append(vid)
        else:
            todo.append((vid, path, sig))
    report.removed = sorted(set(entries) - set(files))
    settings = [identity, clip_seconds, fps]
    jobs = [(vid, path, [src / f["path"] for f in sig["sidecars"]]) for vid, path, sig in todo]
    sigs = {vid: sig for vid, _, sig in todo}
    if ray_address is None:
        worker = VideoWorker(enc, clip_seconds, fps, batch_clips, limits, stills, speech, read_text, ocr_weights)
        worker.recogniser, worker.reader = hearing
        results: Iterator[tuple[str, Encoded]] = ((vid, worker.run(path, sub)) for vid, path, sub in jobs)
    else:
        from momentsearch.video.ray_ingest import ray_results

        results = ray_results(jobs, encoder if isinstance(encoder, str) else enc, encoder_options,
                              (clip_seconds, fps, batch_clips, limits, stills, speech, read_text, ocr_weights), ray_address, ray_workers, threads or 1)
    with _torch_threads(threads if ray_address is None else 0), open(dst / JOURNAL, "a", encoding="utf-8") as journal, tqdm(
            total=len(todo), desc="ingesting", unit="video", disable=not progress or not todo) as bar:
        for vid, done in results:  # in order here, as finished on Ray
            sig = sigs[vid]
            bar.set_postfix_str(Path(sig["path"]).name[:40])
            error = done.error if done.error is not None else _changed(src / sig["path"], sig)
            if error is not None or done.feats is None or done.stats is None:
                report.failures.append({**{k: sig[k] for k in ("path", "size", "mtime_ns")}, "error": error,
                                        **({"unexpected": True} if done.unexpected else {})})
                bar.update(1)
                continue
            feats, st = done.feats, done.stats
            crc = {"visual": _write_array(vis_dir, vid, feats)}
            if done.subtitle is not None:
                make_folder(sub_dir, sub_dir)
                crc["subtitle"] = _write_array(sub_dir, vid, done.subtitle)
            said = None
            if done.transcript is not None:
                make_folder(said_dir, said_dir)
                crc["transcript"] = _write_transcript(said_dir, vid, done.transcript)
                said = {"source": done.transcript.source, "kind": done.transcript.kind,
                        "cues": len(done.transcript.cues)}
            else:
                (said_dir / f"{h5_key(vid)}.json").unlink(missing_ok=True)  # from an earlier ingest of the file
            read = None
            if done.written is not None and done.written_feats is not None:
                make_folder(read_dir, read_dir)
                make_folder(wr_dir, wr_dir)
                crc[WRITTEN] = _write_array(wr_dir, vid, done.written_feats)
                crc["written_text"] = _write_transcript(read_dir, vid, done.written)
                read = {"source": done.written.source, "kind": done.written.kind, "cues": len(done.written.cues)}
            else:
                (read_dir / f"{h5_key(vid)}.json").unlink(missing_ok=True)
            report.warnings += [{"path": sig["path"], "warning": w} for w in done.warnings or []]
            entry = {"id": vid, **sig, "transcript": said, "written": read, "listen": listen, **({"warnings": done.warnings} if done.warnings else {}),
                     "ingested_at": _utc_now(), "duration": round(st.duration, 6),
                     "clip_length": clip_seconds,
                     "n_clips": len(feats), "fps": st.fps, "width": st.width, "height": st.height,
                     "rotation": st.rotation, "codec": st.codec, "frames_decoded": st.n_frames, "crc32": crc}
            journal.write(json.dumps({"settings": settings, "video": entry}) + "\n")
            journal.flush()
            os.fsync(journal.fileno())
            videos[vid] = entry
            report.encoded.append(vid)
            report.video_seconds += st.duration
            bar.update(1)
            el = time.perf_counter() - t0
            bar.set_postfix_str(f"{report.video_seconds / el:.1f} video-s/s")
    report.failures.sort(key=lambda f: f["path"])
    report.warnings.sort(key=lambda w: w["path"])
    report.encoded.sort()
    weights = (encoder_options or {}).get("weights") or getattr(enc, "weights", None)
    _finish(dst, src, identity, clip_seconds, fps, videos, report, sub_dir, wr_dir,
            str(Path(weights).resolve()) if weights and Path(str(weights)).exists() else None)
    report.wall_seconds = time.perf_counter() - t0
    return report


def _finish(dst: Path, src: Path, identity: dict[str, Any], clip_seconds: float, fps: float,
            videos: dict[str, dict[str, Any]], report: IngestReport, sub_dir: Path, wr_dir: Path,
            weights: str | None = None) -> None:
    """Zero rows of the subtitle and written streams for videos without them (when any video has them), the
    manifest, then clean-up."""
    streams: dict[str, Any] = {"visual": {"path": "features/visual", "kind": "npy", "dim": identity["dim"],
                                          "encoder": identity, "crc_of": "stored"}}
    for name, folder in (("subtitle", sub_dir), (WRITTEN, wr_dir)):
        if not any(name in v["crc32"] for v in videos.values()):
            continue
        make_folder(folder, folder)
        for v in videos.values():
            if name not in v["crc32"]:
                v["crc32"][name] = _write_array(folder, v["id"], np.zeros((v["n_clips"], SUBTITLE_ENCODER["dim"])))
        streams[name] = {"path": f"features/{name}", "kind": "npy", "dim": SUBTITLE_ENCODER["dim"],
                         "encoder": SUBTITLE_ENCODER, "crc_of": "stored"}
    warnings = [{"path": v["path"], "warning": w} for k in sorted(videos) for v in [videos[k]]
                for w in v.get("warnings", [])]
    CorpusManifest(identity, streams, [videos[k] for k in sorted(videos)], src.resolve().name, str(src.resolve()),
                   clip_seconds, fps, report.failures, warnings, weights).write(dst)
    (dst / JOURNAL).unlink(missing_ok=True)
    for vid in report.removed:  # after the manifest stopped naming them
        for d in (dst / "features" / "visual", sub_dir, wr_dir):
            (d / f"{h5_key(vid)}.npy").unlink(missing_ok=True)
        for d in (dst / TRANSCRIPTS, dst / WRITTEN):
            (d / f"{h5_key(vid)}.json").unlink(missing_ok=True)
    if WRITTEN not in streams:  # read before, not now: the manifest no longer names the stream's files
        shutil.rmtree(wr_dir, ignore_errors=True)


def _check_listening(speech: str, read_text: bool, ocr_weights: str | None) -> tuple[Any, Any]:
    """The recogniser and the text reader, made once before any video is decoded, so that a missing package or
    weights file is one clear error and not a warning per video (None where not asked for)."""
    from momentsearch.video.speech import create_recogniser

    recogniser = create_recogniser(speech)
    if ocr_weights is not None and not read_text:
        raise ConfigError("--ocr-weights is the text reader's weights: give --read-text too")
    if not read_text:
        return recogniser, None
    from momentsearch.video.ocr.reader import TextReader

    return recogniser, TextReader(ocr_weights)
