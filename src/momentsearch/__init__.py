"""momentsearch: video corpus moment retrieval with many-to-many graded relevance.

    import momentsearch
    searcher = momentsearch.load("runs/demo/xml/checkpoints/best.pt")
    hits = searcher.search("a person opens the fridge", k=5)

``load``, ``evaluate`` and ``train`` come from :mod:`momentsearch.api`, imported on first use so
that ``import momentsearch`` stays light (no torch until a model is needed).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"

_API = ("load", "evaluate", "evaluate_mvmr", "train", "pack", "Searcher", "Hit", "Evaluation", "MVMREvaluation")


def __getattr__(name: str) -> Any:
    if name in _API:
        from momentsearch import api

        return getattr(api, name)
    raise AttributeError(f"module 'momentsearch' has no attribute {name!r}")


__all__ = ["__version__", *_API]
