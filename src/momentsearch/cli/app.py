"""The command line's typer application and what every command module shares. ``cli.main`` registers its
own commands on ``app`` and imports the command modules that register theirs (``corpus_cmds``,
``serve_cmd``), so they import ``app`` from here, not from ``main``."""

from __future__ import annotations

import typer

from momentsearch.errors import MomentSearchError

app = typer.Typer(
    help="momentsearch: video corpus moment retrieval with many-to-many graded relevance.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="Inspect and convert annotation files.", no_args_is_help=True)
app.add_typer(data_app, name="data")


def require_models() -> None:
    """Model commands need the ``models`` extra; say so instead of a ModuleNotFoundError."""
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise MomentSearchError(f"this command needs {', '.join(missing)}: pip install torch (the CPU wheel, or CUDA's "
                                "for a GPU) first, then pip install 'momentsearch[models]'")
