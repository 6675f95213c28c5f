"""The Python API: what the CLI, the demo, the experiment runner and a server stand on.

* :func:`load` -> :class:`Searcher` (``.search(text, k)`` -> list of :class:`Hit`): an index folder, or a split of a
  checkpoint's dataset through an index folder beside it (:func:`load_split`);
* :func:`evaluate` -> :class:`Evaluation` on any split;
* :func:`evaluate_mvmr` -> :class:`MVMREvaluation`: the MVMR protocol over retrieval pools;
* :func:`pack` -> a checkpoint of a family that needs no training (``clip``);
* :func:`train` -> a finished :class:`~momentsearch.training.trainer.Trainer` from a YAML file or config.
"""

from momentsearch.api.evaluator import EVAL_COLUMNS, Evaluation, evaluate
from momentsearch.api.mvmr import MVMREvaluation, evaluate_mvmr
from momentsearch.api.split_search import load, load_split
from momentsearch.api.training import load_train_config, train
from momentsearch.serving.packing import pack
from momentsearch.serving.searcher import Hit, Searcher

__all__ = ["EVAL_COLUMNS", "Evaluation", "Hit", "MVMREvaluation", "evaluate_mvmr", "Searcher", "evaluate", "load", "load_split", "load_train_config", "pack", "train"]
