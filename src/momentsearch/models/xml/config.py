"""XML's typed config: the network (Sec. 3.2 of the pairs paper), its loss, and the many-to-many
training terms of the pairs paper and of Wray et al. (the ``relevance`` section)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class RelevanceTrainConfig:
    """Many-to-many training (issue 4). The default (``method: none``, ``lambda_vcmr: 0``) is XML.

    * ``pairs``: potentially relevant pairs (Maeoki et al. Sec. 4.2) from ``momentsearch pairs``:
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
    * ``pair_mean``: the paper's pair terms are means over the batch's pairs (``pairs``), so one lone pair
      weighs as much as all of them; ``batch`` divides their sums by the batch size instead, as L_pos>neg is
      (a control of issue 42 item 4: at theta 0.9 about 0.6 pairs remain per batch).
    * ``exclusion`` (issue 75): which videos are never query i's negative in the video-level terms.
      ``table``: a video holding any moment paired with i anywhere in the split (for thresholds, at S >= T),
      read from the whole pair table; ``batch``: only those holding a paired moment that is in the batch (what
      every run before issue 75 did: a partner outside the batch left its video a negative).
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
    pair_mean: str = "pairs"  # pairs | batch: what the pair terms' sums are divided by
    exclusion: str = "table"  # table | batch: the video-level negatives leave out partners' videos from where

    def __post_init__(self) -> None:
        if self.method not in ("none", "pairs", "threshold"):
            raise ValueError(f"relevance.method must be none, pairs or threshold, got {self.method!r}")
        if self.method != "none" and not self.table:
            raise ValueError(f"relevance.method {self.method!r} needs relevance.table (a file written by "
                             "`momentsearch pairs` or `momentsearch relevance`)")
        if self.pair_score not in ("raw", "unit"):
            raise ValueError(f"relevance.pair_score must be raw or unit, got {self.pair_score!r}")
        if self.pair_mean not in ("pairs", "batch"):
            raise ValueError(f"relevance.pair_mean must be pairs or batch, got {self.pair_mean!r}")
        if self.exclusion not in ("table", "batch"):
            raise ValueError(f"relevance.exclusion must be table or batch, got {self.exclusion!r}")
        if self.floor_mode not in ("shift", "clamp"):
            raise ValueError(f"relevance.floor_mode must be shift or clamp, got {self.floor_mode!r}")
        lambdas = [v for k, v in vars(self).items() if k.startswith("lambda_")]
        if any(v < 0 for v in lambdas) or self.floor <= 0 or self.segment_scale <= 0:
            raise ValueError("relevance lambdas must be >= 0, floor and segment_scale > 0")

    @property
    def uses_pairs(self) -> bool:
        return self.method != "none"


@dataclass(frozen=True)
class XMLConfig:
    """XML's network, loss and batches; the paper's values (Appendix A) by default. The input dims
    are filled from the data (see ``with_inputs``)."""

    name: str = "xml"
    visual_dim: int = 0
    subtitle_dim: int = 0  # 0: no subtitle stream
    query_dim: int = 384
    hidden: int = 256
    n_heads: int = 4
    dropout: float = 0.1
    # attention: self-attention, dense, dropout, residual LayerNorm, and cross-attention without an
    # output projection (Lei et al.'s code); transformer: nn.TransformerEncoderLayer with a d-wide
    # feed-forward block and nn.MultiheadAttention (the default before issue 23: a checkpoint written
    # then names no encoder_layer and loads as transformer)
    encoder_layer: str = "attention"
    max_clips: int = 128
    max_tokens: int = 32
    conv_kernel: int = 5
    init_std: float = 0.02
    alpha: float = 20.0
    n_min: int = 1
    n_max: int = 20
    # the loss (Eq. 10 + Eq. 16) and its negatives
    margin: float = 0.1
    lambda_tl: float = 0.01  # weight of the start/end NLL
    hard_negative_start_epoch: int = 20  # random in-batch negatives before, top-pool negatives after
    hard_pool_size: int = 20
    # batches
    queries_per_video: int = 0  # 0: random batches (XML); k > 0: batches of groups of k queries of one video
    use_subtitle: bool = True
    relevance: RelevanceTrainConfig = field(default_factory=RelevanceTrainConfig)  # many-to-many terms (issue 4)

    def __post_init__(self) -> None:
        if self.margin < 0 or self.lambda_tl < 0:
            raise ValueError("margin and lambda_tl must be >= 0")
        if self.encoder_layer not in ("attention", "transformer"):
            raise ValueError(f"encoder_layer must be attention or transformer, got {self.encoder_layer!r}")
        if self.n_min < 1 or self.n_max < self.n_min:  # the shared sizes: models.registry.check_sizes
            raise ValueError(f"need 1 <= n_min <= n_max, got n_min {self.n_min}, n_max {self.n_max}")
        if not (self.init_std > 0 and self.alpha > 0):
            raise ValueError(f"init_std and alpha must be > 0, got init_std {self.init_std}, alpha {self.alpha}")
        if self.n_heads and self.hidden % self.n_heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of n_heads ({self.n_heads})")

    @property
    def n_streams(self) -> int:
        return 2 if self.subtitle_dim > 0 else 1

    def with_inputs(self, visual_dim: int, subtitle_dim: int, query_dim: int) -> XMLConfig:
        return replace(self, visual_dim=visual_dim, subtitle_dim=subtitle_dim, query_dim=query_dim)
