"""``momentsearch export INDEX VIDEO_ID --from S --to S --out FILE``: keep a moment as a playable file
(:mod:`momentsearch.serving.clips`), with what is said during it beside it as SRT."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from momentsearch.cli.app import app

if TYPE_CHECKING:
    from momentsearch.serving.clips import ExportedFile


@app.command("export")
def export_cmd(
    index: Annotated[Path, typer.Argument(help="An index folder (momentsearch index) or a sharded index.")],
    video_id: Annotated[str, typer.Argument(help="The video's id, as search prints it.")],
    start: Annotated[float, typer.Option("--from", min=0.0, help="Start of the moment, seconds from the video's start.")],
    end: Annotated[float, typer.Option("--to", min=0.0, help="End of the moment, seconds.")],
    out: Annotated[Path, typer.Option("--out", help="The MP4 file to write, or a folder (the file is then named "
                                                    "VIDEO_START-END.mp4).")] = Path("."),
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing file.")] = False,
) -> None:
    """Cut [--from, --to) of an indexed video into an MP4 (H.264 + AAC), exact to the frame: every kept frame is
    re-encoded. What is said during it (subtitles, transcript or recognised speech), shifted to the new start, goes
    beside it as NAME.srt."""
    from momentsearch.serving.clips import export_clip, index_corpus

    done = export_clip(index_corpus(index), video_id, start, end, out, overwrite=overwrite)
    report(done)


def report(done: ExportedFile) -> None:
    c = done.clip
    cues = f" and {done.cues}" if done.cues else ""
    first = "?" if c.first_frame is None else f"{c.first_frame:.3f}"
    last = "?" if c.last_frame is None else f"{c.last_frame:.3f}"
    typer.echo(f"wrote {done.path}{cues}: {c.end - c.start:.2f} s, {c.frames} frames (source {first}-{last} s), "
               f"{c.audio_seconds:.2f} s of audio, {c.width}x{c.height}, re-encoded: {c.reencoded}")
