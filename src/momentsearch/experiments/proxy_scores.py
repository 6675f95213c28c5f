"""nDCG against a text proxy, as Wray et al. score a model (issue 42 item 6): besides the benchmark's truth, an
experiment can score every run against one of its proxy tables (``score_with: [bow]``), e.g. the BoW table a
thresholded model trained on. Each run is evaluated once per table; the row is stored in its result.json under
``proxy_ndcg`` and joins its metrics as "nDCG VR (bow)" and "nDCG VCMR 0.5 (bow)".

The columns are ``api.evaluator``'s nDCG against a ``momentsearch relevance`` table (Eq. 2's gain and discount
over every moment the table grades for the query, Eq. 3's video nDCG in the text -> video direction). A table
stored from a threshold (``TableSpec.threshold``) grades only S >= it, so its nDCG is not Wray et al.'s; the
runner refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from momentsearch.fileio import write_json

COLUMNS = ("nDCG VR", "nDCG VCMR 0.5")


def proxy_key(name: str, table: Path | str) -> str:
    return f"{name}:{Path(table).name}"


def proxy_metrics(name: str, row: dict[str, float]) -> dict[str, float]:
    return {f"{c} ({name})": float(row[c]) for c in COLUMNS if c in row}


def stored_proxy_metrics(key: str, row: dict[str, float]) -> dict[str, float]:
    """``proxy_metrics`` of a row stored under ``proxy_key(name, table)`` in a run's result.json."""
    return proxy_metrics(key.rsplit(":", 1)[0], row)


def stored_once(out: Path, field: str, key: str, compute: Callable[[], dict[str, float]]) -> dict[str, float]:
    """A row kept in the run's result.json under ``field`` / ``key``, computed (and stored) only where missing: the
    MVMR rows of the runner and the proxy rows here."""
    stored = json.loads((out / "result.json").read_text())
    if key not in stored.get(field, {}):
        stored[field] = {**stored.get(field, {}), key: compute()}
        write_json(out / "result.json", stored)
    return stored[field][key]


def with_proxy_ndcg(result: dict[str, Any], out: Path, split: str, name: str, table: Path | str) -> dict[str, Any]:
    """``result`` with the run's nDCG against ``table`` in its metrics, evaluated and stored where missing."""
    from momentsearch.api import evaluate

    def compute() -> dict[str, float]:
        ev = evaluate(out / "checkpoints" / "best.pt", split, out / f"eval_{split}_{name}", progress=False,
                      relevance=table)
        assert ev.proxy_row is not None
        return {c: ev.proxy_row[c] for c in COLUMNS if c in ev.proxy_row}

    row = stored_once(out, "proxy_ndcg", proxy_key(name, table), compute)
    return {**result, "metrics": {**result["metrics"], **proxy_metrics(name, row)}}
