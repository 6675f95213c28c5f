"""MMN and RMMN (Yang et al., "MVMR: A New Framework for Evaluating Faithfulness of Video Moment
Retrieval against Multiple Distractors", Sec. 5; MMN: Wang et al. 2022): one model family."""

from momentsearch.models.mmn.config import MMNConfig
from momentsearch.models.mmn.family import MMNFamily
from momentsearch.models.mmn.network import MMN

__all__ = ["MMN", "MMNConfig", "MMNFamily"]
