"""Typed training config for XML; YAML files under ``configs/xml/`` fill it."""

from __future__ import annotations

from dataclasses import dataclass, field

from momentsearch.models.xml import XMLConfig


@dataclass(frozen=True)
class XMLTrainConfig:
    """Defaults are the paper's (Appendix A) where it gives them."""

    benchmark: str = "runs/demo/benchmark"  # a synthetic benchmark folder (corpus.jsonl + features/)
    out_dir: str = "runs/xml"
    train_split: str = "train"
    val_split: str = "val"
    seed: int = 0
    epochs: int = 100
    batch_size: int = 128
    lr: float = 1e-4
    margin: float = 0.1
    lambda_tl: float = 0.01  # weight of the start/end NLL
    hard_negative_start_epoch: int = 20  # random in-batch negatives before, top-pool negatives after
    hard_pool_size: int = 20
    queries_per_video: int = 0  # 0: random batches (XML); k > 0: batches of groups of k queries of one video
    use_subtitle: bool = True
    val_max_queries: int = 1000  # validation on a fixed subset, for speed
    k_videos: int = 100
    nms_threshold: float = 0.7
    num_threads: int = 2
    deterministic: bool = True  # torch.use_deterministic_algorithms: bit-identical reruns and resumes
    model: XMLConfig = field(default_factory=XMLConfig)  # input dims come from the data

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError("epochs must be >= 1 and batch_size >= 2 (negatives come from the batch)")
        if self.lr <= 0 or self.margin < 0 or self.lambda_tl < 0:
            raise ValueError("lr must be > 0; margin and lambda_tl >= 0")
