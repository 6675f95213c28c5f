"""momentsearch: video corpus moment retrieval with many-to-many graded relevance.

    import momentsearch
    searcher = momentsearch.load("my_index")          # an index folder (momentsearch index ... --out my_index)
    hits = searcher.search("a person opens the fridge", k=5)
    momentsearch.load("runs/demo/xml/checkpoints/best.pt", split="test")  # a split of a trained model's dataset

``load`` over an index folder and ``pack`` come from :mod:`momentsearch.serving` (the serving core); ``load`` over a
checkpoint, ``evaluate`` and ``train`` from :mod:`momentsearch.api`, each imported on first use so that ``import
momentsearch`` stays light (no torch until a model is needed) and a search of an index folder never imports the
trainer.
"""

from __future__ import annotations

import os
from typing import Any

from momentsearch.version import __version__

# torch's OpenMP workers (GNU libgomp) spin after each parallel region, 300,000 turns by default: long enough
# to take a core from the ``scan`` stage's threads that run next (100k videos at batch 1: the scan 11.7 ms
# with the default, 7.6 ms with 10,000, the query network unchanged at 1.4 ms; docs/first_stage.md). libgomp
# reads this when torch loads, so it applies when momentsearch is imported first; a value of your own is kept.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

_SERVING = ("pack", "Searcher", "Hit", "Query")  # the serving core: no trainer, no evaluation imported
_API = (*_SERVING, "evaluate", "evaluate_mvmr", "train", "Evaluation", "MVMREvaluation")


def load(path: Any, split: str = "test", **options: Any) -> Any:
    """A searcher. ``path`` an index folder: over its corpus (the serving core alone); a checkpoint: over ``split``'s
    videos of the dataset it was trained on, through an index folder written beside it
    (:mod:`momentsearch.api.split_search`). ``options``: ``device``, ``progress``, ``k_videos``, ``cache_size``,
    ``first_stage``, ``first_stage_params``."""
    from pathlib import Path

    if Path(path).is_dir():
        from momentsearch.serving.loader import load as load_index

        return load_index(path, **options)
    from momentsearch.api.split_search import load_split

    return load_split(path, split, **options)


def __getattr__(name: str) -> Any:
    if name == "Client":  # a running service's client: the standard library only
        from momentsearch.client import Client

        return Client
    if name in _SERVING:
        from momentsearch import serving

        return getattr(serving, name)
    if name in _API:
        from momentsearch import api

        return getattr(api, name)
    raise AttributeError(f"module 'momentsearch' has no attribute {name!r}")


__all__ = ["__version__", "Client", "load", *_API]
