"""Typed training config for XML; YAML files under ``configs/xml/`` fill it."""

from __future__ import annotations

from dataclasses import dataclass, field

from momentsearch.models.xml import XMLConfig


@dataclass(frozen=True)
class XMLModelSettings:
    """Everything of :class:`XMLConfig` but the input dims, which come from the data."""

    hidden: int = 256
    n_heads: int = 4
    dropout: float = 0.1
    max_clips: int = 128
    max_tokens: int = 32
    conv_kernel: int = 5
    alpha: float = 20.0
    n_min: int = 1
    n_max: int = 20

    def build(self, visual_dim: int, subtitle_dim: int, query_dim: int) -> XMLConfig:
        return XMLConfig(visual_dim=visual_dim, subtitle_dim=subtitle_dim, query_dim=query_dim, hidden=self.hidden,
                         n_heads=self.n_heads, dropout=self.dropout, max_clips=self.max_clips,
                         max_tokens=self.max_tokens, conv_kernel=self.conv_kernel, alpha=self.alpha,
                         n_min=self.n_min, n_max=self.n_max)


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
    model: XMLModelSettings = field(default_factory=XMLModelSettings)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError("epochs must be >= 1 and batch_size >= 2 (negatives come from the batch)")
        if self.lr <= 0 or self.margin < 0 or self.lambda_tl < 0:
            raise ValueError("lr must be > 0; margin and lambda_tl >= 0")
