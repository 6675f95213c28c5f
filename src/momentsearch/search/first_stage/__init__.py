"""The first stage of search: exact, a compressed scan (``scan``), or a vector backend (FAISS, Milvus)."""

from momentsearch.search.first_stage.base import (
                                                  VectorBackend,
                                                  backend_names,
                                                  create_backend,
                                                  parse_params,
                                                  register_backend,
)
from momentsearch.search.first_stage.pools import restrict_to_pools
from momentsearch.search.first_stage.retrieve import ExactFirstStage, FirstStage, VectorFirstStage, build_first_stage
from momentsearch.search.first_stage.scan import ScanFirstStage

__all__ = ["ExactFirstStage", "FirstStage", "ScanFirstStage", "VectorBackend", "VectorFirstStage", "backend_names",
           "build_first_stage", "create_backend", "parse_params", "register_backend", "restrict_to_pools"]
