"""momentsearch: video corpus moment retrieval with many-to-many graded relevance.

    import momentsearch
    searcher = momentsearch.load("runs/demo/xml/checkpoints/best.pt")
    hits = searcher.search("a person opens the fridge", k=5)

``load`` and ``pack`` come from :mod:`momentsearch.serving` (the serving core), ``evaluate`` and ``train``
from :mod:`momentsearch.api`, each imported on first use so that ``import momentsearch`` stays light (no
torch until a model is needed) and a search never imports the trainer.
"""

from __future__ import annotations

from typing import Any

from momentsearch.version import __version__

_SERVING = ("load", "pack", "Searcher", "Hit")  # the serving core: no trainer, no evaluation imported
_API = (*_SERVING, "evaluate", "evaluate_mvmr", "train", "Evaluation", "MVMREvaluation")


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


__all__ = ["__version__", "Client", *_API]
