"""Typed training config for XML; YAML files under ``configs/xml/`` fill it."""

from __future__ import annotations

from dataclasses import dataclass, field

from momentsearch.models.xml import XMLConfig


@dataclass(frozen=True)
class RelevanceTrainConfig:
    """Many-to-many training (issue 4). The default (``method: none``, ``lambda_vcmr: 0``) is XML.

    * ``pairs``: potentially relevant pairs (Nishimura et al. Sec. 4.2) from ``momentsearch pairs``:
      ``table`` is its output prefix (PREFIX.phi.npz, .psi.npz, .queries.json); a pair is detected
      when Phi >= ``theta``; its confidence C is Psi, or 1 with ``confidence_one`` (the C == 1 ablation).
      Adds L_rel>neg and L_pos>=rel at the video level (Eq. 13) and L_nll,2 (Eq. 18), each weighted
      by its lambda; with ``lambda_vcmr`` > 0 also at the segment level (Eq. 15).
    * ``threshold``: Wray et al. Sec. 4.3: ``table`` is a relevance file from ``momentsearch relevance``
      (it writes FILE.qq.npz and FILE.queries.json beside it); items with S >= ``theta`` (T) are
      positives, S < T negatives, in the video-level triplet loss.
    * ``lambda_vcmr`` > 0 with any method adds the segment-level ranking loss (+SL) on R_vcmr (Eq. 14),
      the start/end logits floored so that their infimum is ``floor`` (``floor_mode``).
    * ``segment_scale``: R_vcmr spans tens of units (log-logits down to log 1e-6 = -13.8 twice, plus
      alpha s_vr with alpha 20) while the margin is 0.1; scaling it (e.g. by 1 / alpha) is not in the
      paper and is off (1.0) by default.
    * ``pair_score``: ``raw`` is the paper's R (s_vr, a cosine in [-1, 1]; R_vcmr, a sum of logs, mostly
      negative). With signed R, Eqs. 11-12 reward a degenerate model: when every score equals some
      -x < 0, L_pos>=rel = 0 and L_rel>neg = 0 for x > Delta / (1 - C), leaving only L_pos>neg = 2 Delta
      (measured here: +PR collapsed to chance). ``unit`` maps R monotonically into [0, 1] before C
      scales it — (1 + s_vr) / 2 and sigmoid(R_vcmr) — where scaling by C < 1 always lowers a score,
      which is what the paper's reading of C (Fig. 4) needs. L_pos>neg is unchanged either way.
    """

    method: str = "none"  # none | pairs | threshold
    table: str = ""
    theta: float = 0.7
    confidence_one: bool = False
    lambda_rel_neg_vr: float = 1.0
    lambda_pos_rel_vr: float = 1.0
    lambda_tl2: float = 1.0
    lambda_vcmr: float = 0.0
    lambda_rel_neg_vcmr: float = 1.0
    lambda_pos_rel_vcmr: float = 1.0
    floor: float = 1e-6
    floor_mode: str = "shift"  # shift | clamp
    pair_score: str = "raw"  # raw | unit: the score C multiplies in Eqs. 11-12 (see below)
    segment_scale: float = 1.0  # R_vcmr is multiplied by this before the segment-level ranking terms

    def __post_init__(self) -> None:
        if self.method not in ("none", "pairs", "threshold"):
            raise ValueError(f"relevance.method must be none, pairs or threshold, got {self.method!r}")
        if self.method != "none" and not self.table:
            raise ValueError(f"relevance.method {self.method!r} needs relevance.table (a file written by "
                             "`momentsearch pairs` or `momentsearch relevance`)")
        if self.pair_score not in ("raw", "unit"):
            raise ValueError(f"relevance.pair_score must be raw or unit, got {self.pair_score!r}")
        if self.floor_mode not in ("shift", "clamp"):
            raise ValueError(f"relevance.floor_mode must be shift or clamp, got {self.floor_mode!r}")
        lambdas = [v for k, v in vars(self).items() if k.startswith("lambda_")]
        if any(v < 0 for v in lambdas) or self.floor <= 0 or self.segment_scale <= 0:
            raise ValueError("relevance lambdas must be >= 0, floor and segment_scale > 0")

    @property
    def uses_pairs(self) -> bool:
        return self.method != "none"


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
    relevance: RelevanceTrainConfig = field(default_factory=RelevanceTrainConfig)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError("epochs must be >= 1 and batch_size >= 2 (negatives come from the batch)")
        if self.lr <= 0 or self.margin < 0 or self.lambda_tl < 0:
            raise ValueError("lr must be > 0; margin and lambda_tl >= 0")
