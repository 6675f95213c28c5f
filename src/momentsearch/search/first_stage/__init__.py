"""The first stage of search: exact, or approximate through a vector backend (FAISS, Milvus)."""

from momentsearch.search.first_stage.base import (VectorBackend, backend_names, create_backend, parse_params,
                                                  register_backend)
from momentsearch.search.first_stage.retrieve import (ExactFirstStage, FirstStage, VectorFirstStage,
                                                      build_first_stage, restrict_to_pools)

__all__ = ["ExactFirstStage", "FirstStage", "VectorBackend", "VectorFirstStage", "backend_names",
           "build_first_stage", "create_backend", "parse_params", "register_backend", "restrict_to_pools"]
