"""A synthetic VCMR benchmark with exhaustive many-to-many ground truth (see ``generator`` and ``oracle``)."""

from momentsearch.data.synthetic.benchmark import SyntheticBenchmark, benchmark_stats, generate
from momentsearch.data.synthetic.concepts import Inventory
from momentsearch.data.synthetic.config import PRESETS, OracleWeights, SyntheticConfig, load_preset
from momentsearch.data.synthetic.oracle import SyntheticOracle

__all__ = [
    "PRESETS",
    "Inventory",
    "OracleWeights",
    "SyntheticBenchmark",
    "SyntheticConfig",
    "SyntheticOracle",
    "benchmark_stats",
    "generate",
    "load_preset",
]
