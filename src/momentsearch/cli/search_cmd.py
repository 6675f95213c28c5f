"""``momentsearch search INDEX_DIR|CHECKPOINT TEXT``: ranked moments on the command line, with the filters of
:class:`~momentsearch.serving.filters.VideoFilter`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from momentsearch.cli.app import app, require_models

if TYPE_CHECKING:
    from momentsearch.search.ranked import Hit
    from momentsearch.serving.filters import VideoFilter


@app.command("search")
def search_cmd(
    checkpoint: Annotated[Path, typer.Argument(help="An index folder (momentsearch index), a sharded index (momentsearch shard), "
                                                    "or a checkpoint (.pt): "
                                                    "then a split of the dataset it was trained on.")],
    query: Annotated[Optional[str], typer.Argument(help="What to look for, e.g. \"a person opens the fridge\".")] = None,
    queries_file: Annotated[Optional[Path], typer.Option(
        "--queries-file", "-f", help="A text file with one query per line (all searched in one process).")] = None,
    k: Annotated[int, typer.Option("-k", min=1, max=1000, help="How many moments to print per query.")] = 10,
    split: Annotated[str, typer.Option(help="With a checkpoint: which split's videos to search.")] = "test",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: [{query, moments: [{video_id, start, end, score}]}].")] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    first_stage: Annotated[Optional[str], typer.Option("--first-stage", help="exact, auto, faiss:FACTORY or "
                                                        "milvus[:URI] (default: auto for an index folder, exact for a checkpoint).")] = None,
    param: Annotated[Optional[list[str]], typer.Option("--param", help="A first-stage parameter KEY=VALUE (nprobe=32).")] = None,
    video: Annotated[Optional[list[str]], typer.Option("--video", help="Search only this video id (repeatable).")] = None,
    path_prefix: Annotated[Optional[str], typer.Option("--path-prefix", help=(
        "Only videos whose path (relative to the ingested folder) starts with this, e.g. holiday/2024/."))] = None,
    min_duration: Annotated[Optional[float], typer.Option("--min-duration", min=0.0, help="Only videos at least this many seconds long.")] = None,
    max_duration: Annotated[Optional[float], typer.Option("--max-duration", min=0.0, help="Only videos at most this many seconds long.")] = None,
    ingested_after: Annotated[Optional[str], typer.Option("--ingested-after", help=(
        "Only videos ingested at or after this UTC time (ISO 8601: 2026-11-01 or 2026-11-01T12:00:00Z)."))] = None,
    ingested_before: Annotated[Optional[str], typer.Option("--ingested-before", help="Only videos ingested before this UTC time.")] = None,
    modified_after: Annotated[Optional[str], typer.Option("--modified-after", help="Only videos whose file is dated at or after this UTC time.")] = None,
    modified_before: Annotated[Optional[str], typer.Option("--modified-before", help="Only videos whose file is dated before this UTC time.")] = None,
    time_from: Annotated[Optional[float], typer.Option("--from", min=0.0, help="Only moments ending after this second of their video.")] = None,
    time_to: Annotated[Optional[float], typer.Option("--to", min=0.0, help="Only moments starting before this second of their video.")] = None,
    group_by_video: Annotated[bool, typer.Option("--group-by-video", help="Each video's best moments together (videos by their best).")] = False,
    per_video: Annotated[int, typer.Option("--per-video", min=1, max=100, help="With --group-by-video: moments per video.")] = 3,
    image: Annotated[Optional[Path], typer.Option("--image", help="Ask with a picture (JPEG, PNG...): moments that look "
                                                                  "like it. With a query too, both weigh alike.")] = None,
    like: Annotated[Optional[str], typer.Option("--like", help="More like this moment: VIDEO_ID:START-END (seconds).")] = None,
    export: Annotated[Optional[Path], typer.Option("--export", help="Write each moment found as an MP4 (and SRT) into "
                                                                    "this folder (momentsearch export).")] = None,
) -> None:
    """Search the corpus for moments matching text queries (the index is built once and cached). The filters
    combine with AND; one that no video passes prints no moments."""
    require_models()
    from momentsearch.errors import QueryError
    from momentsearch.serving.filters import VideoFilter

    where = VideoFilter.of(video, path_prefix, min_duration, max_duration, ingested_after, ingested_before,
                           modified_after, modified_before)

    texts: list[Any] = [query] if query is not None else []
    if queries_file is not None:
        from momentsearch.text.query_file import read_query_file

        texts += read_query_file(queries_file)
    if image is not None or like is not None:
        from momentsearch.serving.query import Query

        if len(texts) > 1:
            raise QueryError("--image and --like ask one query: give at most one text with them, not --queries-file")
        texts = [Query(texts[0] if texts else None, image=image, like=like)]
    if not texts:
        raise QueryError("give a query, --image, --like, or --queries-file with one query per line")
    from momentsearch.search.first_stage import parse_params

    run_search(checkpoint, texts, k, split, as_json, device, progress=not as_json, first_stage=first_stage,
               first_stage_params=parse_params(param), where=where,
               arrange={"time_from": time_from, "time_to": time_to, "per_video": per_video if group_by_video else None},
               export=export)


def run_search(checkpoint: Path, texts: list[Any], k: int = 10, split: str = "test", as_json: bool = False,
               device: str = "auto", progress: bool = True, first_stage: str | None = None,
               first_stage_params: dict[str, str] | None = None, where: VideoFilter | None = None,
               arrange: dict[str, Any] | None = None, export: Path | None = None) -> list[list[Hit]]:
    import warnings

    from momentsearch.serving.freshness import StaleIndexWarning
    from momentsearch.serving.indexing import is_index_folder
    from momentsearch.serving.shards import is_sharded

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StaleIndexWarning)
        if is_index_folder(checkpoint) or is_sharded(checkpoint):  # the serving core alone: no trainer, no dataset
            from momentsearch.serving.loader import load

            searcher = load(checkpoint, device=device, progress=progress, first_stage=first_stage,
                            first_stage_params=first_stage_params)
        else:
            from momentsearch.api.split_search import load_split

            searcher = load_split(checkpoint, split, device=device, progress=progress, first_stage=first_stage,
                                  first_stage_params=first_stage_params)
    for w in caught:  # a stale index said once, plainly, on stderr (the results stay on stdout)
        if issubclass(w.category, StaleIndexWarning):
            typer.echo(f"warning: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    results = searcher.search_many(texts, k, where=where, **(arrange or {}))
    labels = [t if isinstance(t, str) else t.label for t in texts]
    if as_json:
        typer.echo(json.dumps([{"query": t, "moments": [vars(h) for h in hits]}
                               for t, hits in zip(labels, results, strict=True)], indent=1))
    else:
        for t, hits in zip(labels, results, strict=True):
            print_results(t, hits)
    if export is not None:
        from momentsearch.cli.export_cmd import report
        from momentsearch.serving.clips import export_clip

        for hits in results:
            for h in hits:
                done = export_clip(searcher.corpus, h.video_id, h.start, h.end, export, overwrite=True)
                if not as_json:
                    report(done)
    return results


def print_results(text: str, hits: list[Hit]) -> None:
    """Spans as mm:ss; the score as a share of the top hit's (the raw scale is the model's own)."""
    from momentsearch.evaluation.report import mmss

    typer.echo(f"query: {text}")
    top = hits[0].score if hits and hits[0].score > 0 else None
    for r, h in enumerate(hits, start=1):
        rel = f"{100 * h.score / top:5.1f}% of top" if top else f"score {h.score:.4g}"
        typer.echo(f"{r:>3}. {h.video_id}  {mmss(h.start)}-{mmss(h.end)}  ({h.end - h.start:.1f} s)  {rel}")
