"""An experiment's relevance tables (the ``tables:`` of its YAML): what each kind is, and where its files are
computed once per benchmark (``benchmark/relevance/``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from momentsearch.console import say

TABLE_KINDS = ("pairs", "proxy", "oracle", "oracle_confidence", "oracle_count", "shuffled")


@dataclass(frozen=True)
class TableSpec:
    """A relevance table over the experiment's benchmark: ``momentsearch pairs`` or ``relevance``,
    or (``oracle``) the synthetic oracle's true relevance between training queries, or one of the
    diagnosis tables of :mod:`momentsearch.relevance.oracle_pairs`: ``oracle_confidence`` (the
    detector's pairs, C = the true grade), ``oracle_count`` (true pairs at the detector's count) and
    ``shuffled`` (the detector's count and C per query, partners from unrelated videos: a control)."""

    kind: str  # pairs | proxy | oracle | oracle_confidence | oracle_count | shuffled
    detector: str = "vp"  # pairs, oracle_*: sent | vp | np-vp
    proxy: str = "bow"  # proxy: bow | pos | synset | meteor | cosine
    top_k: int = 100  # proxy: stored entries per query (0: every S > 0, no cut)
    threshold: float = 0.0  # proxy: only S >= this is stored (a threshold T >= it trains the same; far smaller)
    theta: float = 0.7  # oracle_*: the detector's threshold (the count to match; the precision reported)


def table_files(bench: Path, folder: Path, spec: TableSpec, corpus: Any) -> Path:
    """The prefix of one table, computed where its files are missing."""
    from momentsearch.api.relevance_tables import run_oracle_pairs, run_pairs, run_relevance
    from momentsearch.relevance import oracle_pairs

    def missing(prefix: Path, *names: str) -> bool:
        return not all(prefix.with_suffix(f".{n}").exists() for n in ("queries.json", *names))

    if spec.kind == "pairs":
        prefix = folder / f"pairs_{spec.detector}"
        if missing(prefix, "psi.npz"):
            say(f"table: Phi_{spec.detector} pairs over {bench}")
            run_pairs(bench, spec.detector, prefix, n_examples=0)
    elif spec.kind == "oracle":
        prefix = folder / "oracle_train"
        if missing(prefix, "qq.npz"):
            say("table: oracle relevance between training queries")
            run_oracle_pairs(bench, prefix)
    elif spec.kind == "proxy":
        cut = f"_s{spec.threshold:g}".replace(".", "p") if spec.threshold > 0 else ""
        prefix = folder / (f"proxy_{spec.proxy}_top{spec.top_k}{cut}.npz" if spec.top_k else
                           f"proxy_{spec.proxy}_all{cut}.npz")
        if missing(prefix, "qq.npz"):
            say(f"table: {spec.proxy} relevance over {bench}")
            run_relevance(bench, spec.proxy, prefix, top_k=spec.top_k, threshold=spec.threshold)
    else:
        detector = table_files(bench, folder, TableSpec("pairs", spec.detector), corpus)
        oracle = table_files(bench, folder, TableSpec("oracle"), corpus)
        # no dot in the name: Path.with_suffix would cut "_0.7" to "_0", and theta 0.7 and 0.9 would share files
        prefix = folder / f"{spec.kind}_{spec.detector}_{spec.theta:g}".replace(".", "p")
        if missing(prefix, "psi.npz"):
            video_of = {m.query_id: m.video_id for m in corpus.moments}
            make = {"oracle_confidence": oracle_pairs.oracle_confidence, "oracle_count": oracle_pairs.oracle_at_count,
                    "shuffled": oracle_pairs.shuffled_partners}[spec.kind]
            stats = make(detector, oracle, prefix, spec.theta, video_of)
            say(f"table {prefix.name}: " + ", ".join(f"{k} {v}" for k, v in stats.items() if k[0] != "o"))
    return prefix
