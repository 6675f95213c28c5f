"""Metric tables (markdown, rich) and recall@k curve plots (PNG)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from momentsearch.fileio import atomic_path


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """{"VCMR": {"0.5-r1": x}} -> {"VCMR 0.5-r1": x}; non-numbers are dropped."""
    out: dict[str, float] = {}
    for k, v in metrics.items():
        key = f"{prefix} {k}".strip()
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def markdown_table(rows: Mapping[str, Mapping[str, float]], columns: Sequence[str]) -> str:
    head = "| ranker | " + " | ".join(columns) + " |"
    sep = "|---|" + "---:|" * len(columns)
    lines = [head, sep]
    for name, vals in rows.items():
        cells = [fmt(vals.get(c)) for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.2f}"


def print_table(rows: Mapping[str, Mapping[str, float]], columns: Sequence[str], title: str = "") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None)
    table.add_column("ranker")
    for c in columns:
        table.add_column(c, justify="right")
    for name, vals in rows.items():
        table.add_row(name, *[fmt(vals.get(c)) for c in columns])
    console = Console()  # in a terminal: its width; in a pipe or a file: wide enough for every column
    if not console.is_terminal:
        console = Console(width=max(120, 14 * (len(columns) + 2)))
    console.print(table)


def plot_recall_curves(
    curves: Mapping[str, Mapping[str, Sequence[float]]], ks: Sequence[int], path: str | Path, title: str = "",
    log_x: bool = True, x_label: str = "k", y_max: float | None = 101,
) -> Path:
    """``curves[panel][line]`` = values (recall %) at each x (k, or epoch); one panel per tIoU, task
    or quantity. Writes a PNG atomically."""
    panels = list(curves)
    fig, axes = figure(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for name, ys in curves[panel].items():
            ax.plot(list(ks), list(ys), label=name)
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(x_label)
        if y_max is not None:
            ax.set_ylabel("recall@k (%)")
            ax.set_ylim(0, y_max)
        ax.set_title(panel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return save_png(fig, path)


def figure(*args: Any, **kwargs: Any) -> Any:
    """``plt.subplots`` on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_png(fig: Any, path: str | Path) -> Path:
    """Lay out, write atomically as PNG, and close the figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    p = Path(path)
    with atomic_path(p) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return p


def mmss(seconds: float) -> str:
    """Seconds as mm:ss."""
    s = int(round(seconds))
    return f"{s // 60:02d}:{s % 60:02d}"
