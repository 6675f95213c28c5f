"""The serving core: what searching needs, and nothing of training or evaluation.

* :mod:`~momentsearch.serving.checkpoint`: reading (and packing) checkpoints;
* :mod:`~momentsearch.device`: device selection and torch settings;
* :mod:`~momentsearch.serving.searcher`: :func:`load` (an index folder) -> :class:`Searcher` (``.search(text, k)``
  -> :class:`Hit`); a request is checked once into a :class:`~momentsearch.serving.plan.SearchPlan`; a query is
  words or a :class:`~momentsearch.serving.query.Query` (a picture, a found moment, or words with either);
* :mod:`~momentsearch.serving.indexing`: index folders (``build_index``, ``IndexFolder``);
* :mod:`~momentsearch.serving.packing`: :func:`pack`, a checkpoint of a family that needs no training.

It opens no dataset (``momentsearch.api.split_search`` turns a checkpoint's split into an index folder) and imports
nothing from ``training``, ``data.loaders`` or the evaluation metrics (``tests/test_layers.py``
checks what ``load(INDEX_DIR)`` and the service import); training and evaluation build on it. Device
selection is :mod:`momentsearch.device`, beside ``errors`` at the base, for every stage.
"""

from momentsearch.serving.loader import load
from momentsearch.serving.packing import pack
from momentsearch.serving.query import Query
from momentsearch.serving.searcher import Hit, Searcher

__all__ = ["Hit", "Query", "Searcher", "load", "pack"]
