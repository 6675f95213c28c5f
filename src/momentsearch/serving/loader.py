"""``load(PATH)``: a searcher over an index folder (:func:`~momentsearch.serving.searcher.load_index`: a
:class:`~momentsearch.serving.searcher.Searcher`) or over a sharded index
(:func:`~momentsearch.serving.sharded_search.load_sharded`: a
:class:`~momentsearch.serving.sharded_search.ShardedSearcher`), with the same interface and the same answers."""

from __future__ import annotations

from pathlib import Path

from momentsearch.errors import SearchIndexError
from momentsearch.serving.searcher import PlannedSearch, load_index
from momentsearch.serving.shards import is_sharded


def load(path: str | Path, device: str = "auto", progress: bool = False, k_videos: int | None = None,
         cache_size: int = 4096, first_stage: str | None = None, first_stage_params: dict[str, str] | None = None,
         ray: str | None = None, replicas: int = 1) -> PlannedSearch:
    """A searcher over an index folder's corpus (``momentsearch index``), searched as its ``index.json`` says
    (``k_videos`` overrides it). ``first_stage``: ``exact``, ``auto`` (the default), ``scan``, ``faiss:FACTORY`` or
    ``milvus[:URI]``; its vector indexes are kept in the folder's ``first_stage/``. (``momentsearch.load(CHECKPOINT,
    split)`` first writes a dataset split's index folder beside the checkpoint.) A sharded index
    (``momentsearch shard``): its shards in this process, or ``replicas`` Ray actors each on the cluster at ``ray``
    (``local``, ``auto``, ``HOST:PORT``)."""
    if is_sharded(path):
        from momentsearch.serving.sharded_search import load_sharded

        return load_sharded(path, device, ray, replicas, first_stage, first_stage_params, k_videos, cache_size)
    if ray is not None:
        raise SearchIndexError(f"{path}: one index folder, not a sharded index; Ray serves the shards of one "
                               f"(`momentsearch shard {path} --into N --out SHARDED`)")
    return load_index(path, device, progress, k_videos, cache_size, first_stage, first_stage_params)
