"""Shared bits of the benchmark scripts: timing, peak memory, the results table and JSON."""

from __future__ import annotations

import json
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(name: str, rows: list[dict[str, Any]], command: str, out: Path | None = None,
           extra: dict[str, Any] | None = None) -> None:
    """Print the table; write the JSON to ``out`` (default ``results/<name>.json``), with ``extra``'s keys beside
    the rows."""
    cols = list(rows[0])
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in cols]
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(_fmt(r[c]).ljust(w) for c, w in zip(cols, widths)))
    RESULTS.mkdir(exist_ok=True)
    out = out or RESULTS / f"{name}.json"
    out.write_text(json.dumps({
        "command": command, "machine": f"{platform.machine()}, {platform.python_version()}",
        "rows": rows, **(extra or {}),
    }, indent=2) + "\n")
    print(f"\nwrote {out}")


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)
