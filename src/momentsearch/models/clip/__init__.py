"""The training-free CLIP searcher (``model: {name: clip}``), packed with ``momentsearch pack clip``."""

from momentsearch.models.clip.config import CLIPSearchConfig
from momentsearch.models.clip.family import CLIPFamily
from momentsearch.models.clip.moments import similarity_moments

__all__ = ["CLIPFamily", "CLIPSearchConfig", "similarity_moments"]
