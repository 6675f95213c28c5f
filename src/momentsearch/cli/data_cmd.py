"""``momentsearch data info``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from momentsearch.data.loaders import detect_format, load_corpus


def run_info(path: Path, format: str | None, as_json: bool, annotations: Path | None = None) -> None:
    fmt = format or detect_format(path)
    if fmt == "mvmr":
        return run_mvmr_info(path, annotations, as_json)
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


TABLE3 = (("n_queries", "#queries", "{:,}"), ("n_videos", "#videos", "{:,}"), ("moment_len_s", "avg moment length (s)", "{:.2f}"),
          ("video_len_s", "avg video length (s)", "{:.2f}"), ("positives_per_query", "avg positive moments per query", "{:.2f}"),
          ("query_words", "avg query length (words)", "{:.2f}"), ("pool_size", "#retrieval pool", "{}"),
          ("max_positives", "max positive moments per query", "{}"))


def run_mvmr_info(path: Path, annotations: Path | None, as_json: bool) -> None:
    """An MVMR pool file's statistics: all pools, the full ones (n videos; the paper's count), the paper's."""
    from momentsearch.data.mvmr import PAPER_TABLE3, dataset_of, load_mvmr_pools

    pools = load_mvmr_pools(path, annotations)
    paper = PAPER_TABLE3.get(dataset_of(path) or "")
    stats = {"path": str(path), "format": "mvmr", "annotations": pools.corpus.name,
             "all_pools": pools.stats(), "full_pools": pools.full().stats(), "paper_table3": paper}
    if as_json:
        typer.echo(json.dumps(stats, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{path} (MVMR pools over {pools.corpus.name})")
    for col in ("", "all pools", f"full pools (n = {pools.pool_size})", "paper, Table 3"):
        t.add_column(col)
    for key, label, fmt in TABLE3:
        cells = [fmt.format(stats[s][key]) for s in ("all_pools", "full_pools")]
        t.add_row(label, *cells, fmt.format(paper[key]) if paper else "–")
    a = stats["all_pools"]
    t.add_row("avg length of every positive moment (s)", f"{a['positive_moment_len_s']:.2f}",
              f"{stats['full_pools']['positive_moment_len_s']:.2f}", "–")
    t.add_row("queries without extra positives", f"{a['queries_without_extra_positives']:,}",
              f"{stats['full_pools']['queries_without_extra_positives']:,}", "–")
    t.add_row("pool sizes", ", ".join(f"{k}: {v:,}" for k, v in a["pool_sizes"].items()), "", "")
    t.add_row("join to the annotations", f"{a['join_text_differs']} texts differ, {a['join_span_differs']} spans "
              f"differ by > 0.05 s, {a['join_queries_without_pool']} queries without a pool", "", "")
    Console().print(t)
