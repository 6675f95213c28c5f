"""``momentsearch alerts add|list|remove|log INDEX``: saved searches, run by ``watch`` and ``serve --watch`` over
each round's new videos (:mod:`momentsearch.serving.alerts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from momentsearch.cli.app import app

alerts_app = typer.Typer(help="Saved searches: be told when new videos match.", no_args_is_help=True)
app.add_typer(alerts_app, name="alerts")

IndexArg = Annotated[Path, typer.Argument(help="The index folder (saved searches live beside it, in INDEX.alerts/).")]


def _book(index: Path):  # noqa: ANN202 - an AlertBook
    from momentsearch.errors import SearchIndexError
    from momentsearch.serving.alerts import AlertBook
    from momentsearch.serving.indexing import is_index_folder
    from momentsearch.serving.shards import is_sharded

    if not (is_index_folder(index) or is_sharded(index)):
        raise SearchIndexError(f"{index}: not an index folder (momentsearch index)")
    return AlertBook(index)


@alerts_app.command("add")
def add(index: IndexArg, query: Annotated[str, typer.Argument(help="What to look for.")],
        min_score: Annotated[float, typer.Option("--min-score", help="Alert on moments scoring at least this (the "
                                                                     "scores search prints).")],
        k: Annotated[int, typer.Option("-k", min=1, max=100, help="Moments looked at per round.")] = 10,
        path_prefix: Annotated[Optional[str], typer.Option("--path-prefix", help="Only videos under this path.")] = None,
        webhook: Annotated[Optional[str], typer.Option("--webhook", help="POST each alert here as JSON.")] = None,
        ) -> None:
    """Save a search: from now on, each new or changed video that watch indexes is searched for it."""
    s = _book(index).add(query, min_score, k, path_prefix, webhook)
    typer.echo(f"saved {s.id}: {s.query!r} at score >= {s.min_score:g}" + (f", posted to {s.webhook}" if s.webhook else ""))


@alerts_app.command("list")
def list_cmd(index: IndexArg) -> None:
    """The saved searches."""
    for s in _book(index).searches():
        typer.echo(f"{s.id}  {s.query!r}  min_score {s.min_score:g}  k {s.k}" + (f"  under {s.path_prefix}" if s.path_prefix
                                                                                else "") + (f"  -> {s.webhook}" if s.webhook else ""))


@alerts_app.command("remove")
def remove(index: IndexArg, search_id: Annotated[str, typer.Argument(help="The id list prints.")]) -> None:
    """Forget a saved search (its alerts stay in the log)."""
    _book(index).remove(search_id)
    typer.echo(f"removed {search_id}")


@alerts_app.command("log")
def log(index: IndexArg) -> None:
    """Every alert raised, oldest first."""
    for a in _book(index).alerts():
        typer.echo(f"{a.at}  {a.query!r}  {a.video_id}  {a.start:.1f}-{a.end:.1f} s  score {a.score:.3f}")
