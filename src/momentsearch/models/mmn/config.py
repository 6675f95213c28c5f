"""MMN / RMMN's typed config (Yang et al. Sec. 5.3 and App. D; Wang et al. 2022 for MMN's map).

RMMN is MMN trained with reliable negatives, so one family serves the paper's three rows:

* MMN:   ``true_negatives: false``, ``hard_negative_start_epoch: 0``;
* RMMN†: ``true_negatives: true`` (Sec. 5.1: a negative must have s_te < t_tr; s_te from the sentence
  embeddings, or from a relevance table with ``true_negatives_table``);
* RMMN:  also ``hard_negative_start_epoch: E`` (Sec. 5.2: from epoch E, CM-ANS hard negatives only,
  learning rate x ``hard_negative_lr_scale``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class MMNConfig:
    name: str = "mmn"
    visual_dim: int = 0
    subtitle_dim: int = 0  # a subtitle stream, when the data has one, is concatenated to the visual clips
    query_dim: int = 384
    # 2D temporal map (MMN / 2D-TAN): N sampled clips, max-pooled moments, L 2D conv layers
    num_clips: int = 16  # N (MMN: 16 on Charades-STA, 64 on ActivityNet, 128 on TACoS)
    hidden: int = 512  # channels of the map and its convolutions
    conv_layers: int = 2  # L
    kernel_size: int = 5
    max_span: int = 0  # longest moment in sampled clips; 0 = N (every i <= j)
    # MMN's released network (configs/mmn/*.yaml set them; these defaults keep checkpoints made before
    # the options as they were trained):
    pool_after_fc: bool = False  # True: FC + ReLU on every clip, then the average into N segments (MMN's
    #                              FeatAvgPool); False: the average first
    conv_norm: str = "none"  # "batch": BatchNorm2d after each 2D convolution, before its ReLU (MMN's ProposalConv)
    mask_renorm: bool = False  # True: MMN's ProposalConv masking: the first layer padded (k-1)L/2, the others
    #                            not, each output cell scaled by 1 / (valid cells under the kernel) with the
    #                            valid mask growing layer by layer; False: "same" padding, invalid cells zeroed
    joint_dim: int = 256  # d of the joint visual-text space
    query_layers: int = 1  # Transformer layers over the token features before average pooling
    n_heads: int = 4
    dropout: float = 0.1
    max_tokens: int = 32
    # IoU head (Eq. 8): p = sigmoid(scale * cos), BCE against the scaled IoU (2D-TAN / MMN)
    iou_scale: float = 10.0
    min_iou: float = 0.5
    max_iou: float = 1.0
    bce_on_negatives: bool = False  # Sec. 5.3: "L_bce ... for the reliable negatives" too (targets 0)
    # how the negatives' cells weigh against the gold video's: "pooled" (one mean over all, so the gold video
    # is 1 / (1 + negative videos) of the term) or "balanced" (the gold video's mean + the negatives' mean)
    bce_negative_weighting: str = "pooled"
    # mutual matching (Eq. 9)
    margin: float = 0.4  # psi (0.4 Charades-STA, 0.3 ActivityNet, 0.1 TACoS)
    tau_q: float = 0.1
    tau_m: float = 0.1
    neg_iou: float = 0.5  # moments of the gold video below this IoU are negatives of p(m|q)
    sent_removal_iou: float = 0.5  # same-video queries whose moment overlaps this much are not negatives
    lambda_rmm: float = 0.05  # lambda of Eq. 10 (0.05 Charades-STA and TACoS, 0.1 ActivityNet)
    score_pow: float = 0.5  # s_rmm = ((1 + cos) / 2) ** score_pow, MMN's inference mapping into [0, 1]
    # reliable negatives (Secs. 5.1-5.2)
    true_negatives: bool = False  # Eq. 4: only negatives with s_te(q, v) < t_tr
    t_tr: float = 0.9
    # s_te from a relevance table instead of the sentence embeddings: the prefix of `momentsearch relevance`
    # (a proxy's S) or of the synthetic oracle's table (true grades); a pair is unreliable at S >= t_tr
    true_negatives_table: str = ""
    hard_negative_start_epoch: int = 0  # 0: no second stage; else CM-ANS from this epoch (0-based)
    hard_negative_lr_scale: float = 0.1
    fine_tune_hard: bool = False  # the whole run is the CM-ANS stage: fine-tuning a trained model (the trainer's
    #                               init_from), as the paper trains "pre-trained models further" (Sec. 5.2)
    hard_video_candidates: int = 50  # V_q^-: the top negatives by r(q, v) that p'(v|q) ranges over
    hard_query_candidates: int = 100  # Q_v^-: likewise for p'(q|v)
    hard_videos: int = 8  # negative videos drawn per query per epoch
    hard_queries: int = 8  # negative queries drawn per video per epoch
    # a, b of Eqs. 5-7 (not given in the paper). Scores r lie in [0, 1], so a = 1 would weigh the top
    # candidates within a factor of e of each other (a near-uniform draw). a = 50: a candidate 0.3 from the
    # peak is drawn e^-4.5, about 1/90, as often as one at it, one 0.1 away e^-0.5. b = -0.1 puts the peak
    # just below the positives' mean, so that candidates scoring at or above the positive (likely false
    # negatives) are drawn less than the hard ones just under it. a = 0: every candidate equally (issue 75's
    # control that varies only the sampling).
    ans_a: float = 50.0
    ans_b: float = -0.1
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.num_clips < 2 or self.conv_layers < 0 or self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise ValueError("need num_clips >= 2, conv_layers >= 0 and an odd kernel_size")
        if not 0 <= self.max_span <= self.num_clips:
            raise ValueError(f"max_span must be in [0, num_clips={self.num_clips}], got {self.max_span}")
        if not 0 <= self.min_iou < self.max_iou <= 1:
            raise ValueError(f"need 0 <= min_iou < max_iou <= 1, got {self.min_iou}, {self.max_iou}")
        if self.tau_q <= 0 or self.tau_m <= 0 or self.iou_scale <= 0:
            raise ValueError("tau_q, tau_m and iou_scale must be > 0")
        if self.hidden % self.n_heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of n_heads ({self.n_heads})")
        if self.hard_negative_start_epoch < 0 or not 0 < self.hard_negative_lr_scale <= 1:
            raise ValueError("need hard_negative_start_epoch >= 0 and 0 < hard_negative_lr_scale <= 1")
        if min(self.hard_videos, self.hard_queries) < 1 or self.hard_videos > self.hard_video_candidates \
                or self.hard_queries > self.hard_query_candidates:
            raise ValueError("need 1 <= hard_videos <= hard_video_candidates and 1 <= hard_queries <= "
                             "hard_query_candidates")
        if self.true_negatives_table and not self.true_negatives:
            raise ValueError("true_negatives_table is set but true_negatives is off: set true_negatives: true")
        if self.ans_a < 0:
            raise ValueError("ans_a must be >= 0 (0: the hard candidates drawn uniformly, the sampling control)")
        if self.bce_negative_weighting not in ("pooled", "balanced"):
            raise ValueError(f"bce_negative_weighting must be 'pooled' or 'balanced', got {self.bce_negative_weighting!r}")
        if self.conv_norm not in ("none", "batch"):
            raise ValueError(f"conv_norm must be 'none' or 'batch', got {self.conv_norm!r}")

    @property
    def span(self) -> int:
        return self.max_span or self.num_clips

    def with_inputs(self, visual_dim: int, subtitle_dim: int, query_dim: int) -> MMNConfig:
        return replace(self, visual_dim=visual_dim, subtitle_dim=subtitle_dim, query_dim=query_dim)
