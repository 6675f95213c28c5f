"""XML, Cross-modal Moment Localization (Lei et al., 2020): the first model family.

``config`` (typed config), ``network`` (the model, Eqs. 1-4), ``batches``, ``loss`` (Eq. 10 and
16 plus the many-to-many terms of Eq. 9), ``search`` (index, retriever, localizer), ``family``.
"""

from momentsearch.models.xml.config import RelevanceTrainConfig, XMLConfig
from momentsearch.models.xml.family import XMLFamily
from momentsearch.models.xml.network import XML

__all__ = ["XML", "XMLConfig", "XMLFamily", "RelevanceTrainConfig"]
