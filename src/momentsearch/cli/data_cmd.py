"""``momentsearch data info``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from momentsearch.data.loaders import detect_format, load_corpus


def run_info(path: Path, format: str | None, as_json: bool) -> None:
    fmt = format or detect_format(path)
    corpus = load_corpus(path, fmt)
    stats = {"path": str(path), "format": fmt, **corpus.stats()}
    estimated = sum(1 for v in corpus.videos.values() if v.meta.get("duration_estimated_from_annotations"))
    if estimated:
        stats["videos_with_estimated_duration"] = estimated
    if as_json:
        typer.echo(json.dumps(stats, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{path} ({fmt})", show_header=False)
    t.add_column("what")
    t.add_column("value")
    for key in ("n_queries", "n_queries_with_ground_truth", "n_videos", "n_videos_with_queries", "n_spans",
                "n_unique_moments", "n_videos_with_subtitles"):
        t.add_row(key, f"{stats[key]:,}")
    for key in ("video_duration_s", "span_length_s", "span_relative_length", "span_start_relative"):
        s = stats[key]
        t.add_row(key, "–" if s is None else "  ".join(f"{k} {v:g}" for k, v in s.items()))
    t.add_row("spans_per_query", ", ".join(f"{k}: {v:,}" for k, v in stats["spans_per_query"].items()))
    for name, s in stats["splits"].items():
        t.add_row(f"split {name}", f"{s['n_queries']:,} queries, {s['n_videos']:,} videos")
    if stats["query_types"]:
        t.add_row("query_types", ", ".join(f"{k}: {v:,}" for k, v in stats["query_types"].items()))
    if stats["quirks"]:
        t.add_row("corrected quirks", ", ".join(f"{k}: {v:,}" for k, v in stats["quirks"].items()))
    if estimated:
        t.add_row("estimated durations", f"{estimated:,} videos: no Charades_v1_<split>.csv beside the file, so each "
                  "duration is the video's largest annotated end (a lower bound)")
    Console().print(t)
