"""MINUTE's typed config (Hou et al., Secs. 4-5.3): the retriever, the localizer, their schedule
and the inference scoring. The paper's values by default; input dims are filled from the data."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class MINUTEConfig:
    """Training runs in two phases within one run and one checkpoint: epochs [0, retriever_epochs)
    train the retriever (InfoNCE, Eq. 18); the later epochs train the localizer with Shared-Norm
    (Eq. 19) on ``n_negatives`` videos per query drawn from the retriever's top ``negative_pool``
    training videos. ``epochs`` of the training config is the total of both."""

    name: str = "minute"
    visual_dim: int = 0
    subtitle_dim: int = 0  # 0: no subtitle stream (DiDeMo, Charades-STA): S_R = phi_I
    query_dim: int = 384
    hidden: int = 256
    n_heads: int = 4
    dropout: float = 0.1
    max_clips: int = 128
    max_tokens: int = 32
    init_std: float = 0.02
    # localizer (Sec. 4.2.2)
    localizer_layers: int = 3  # the multimodal Transformer (MMT)
    conv_kernel: int = 5  # the two 1-D convolutions giving the start and end logits
    use_mcm: bool = True  # multimodal clue mining (Eqs. 15-17); False: the Table 5 "w/o MCM" ablation
    use_mmt: bool = True  # False: the Table 5 "w/o MMT" ablation (fused clips straight to the convolutions)
    # with use_mcm False: scale each clip vector by 1/sqrt(hidden), as MCM's unit-norm weights do on average,
    # so that "w/o MCM" differs from MCM in the query conditioning only (a control for the ablation)
    mcm_scale_control: bool = False
    # the video encoder and the localizer run over a batch's videos in this many passes, shortest first, each
    # padded to its own longest video (network.by_length): the same function, less arithmetic on padding
    # (training epochs 1.5-1.7x faster on the converge preset); 1: one pass padded to the batch's longest, what
    # every MINUTE run before this option did, float for float (a checkpoint stored without it reads as 1)
    length_passes: int = 4
    # schedule (Sec. 5.3: retriever 100 epochs, batch 256; localizer 10 epochs, batch 32; AdamW 1e-4, wd 0.01)
    retriever_epochs: int = 100
    localizer_batch_size: int = 32  # 0: the training config's batch_size in both phases
    n_negatives: int = 4  # hard negative videos per query for Shared-Norm (4 on TVR, 2 on DiDeMo)
    negative_pool: int = 100  # drawn from the retriever's top-ranked training videos
    weight_decay: float = 0.01
    # inference (Sec. 4.1, 5.3)
    scoring: str = "shared_norm"  # shared_norm: S = S_R + l_st + l_ed (Eq. 13) | two_stage: Eqs. 5-7
    alpha: float = 1.0  # two_stage only: exp(alpha S_R) P_st P_ed
    n_min: int = 1  # moment length limits, in clips ([1, 24] on TVR)
    n_max: int = 24

    def __post_init__(self) -> None:
        if self.hidden % self.n_heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of n_heads ({self.n_heads})")
        if self.scoring not in ("shared_norm", "two_stage"):
            raise ValueError(f"scoring must be shared_norm or two_stage, got {self.scoring!r}")
        if self.retriever_epochs < 0 or self.localizer_batch_size < 0:
            raise ValueError("retriever_epochs and localizer_batch_size must be >= 0")
        if not 1 <= self.n_negatives <= self.negative_pool:
            raise ValueError(f"need 1 <= n_negatives ({self.n_negatives}) <= negative_pool ({self.negative_pool})")
        if not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"need 1 <= n_min ({self.n_min}) <= n_max ({self.n_max})")
        if self.localizer_layers < 1 and self.use_mmt:
            raise ValueError("localizer_layers must be >= 1 (or use_mmt: false)")
        if self.length_passes < 1:
            raise ValueError("length_passes must be >= 1")
        if self.weight_decay < 0:
            raise ValueError("weight_decay must be >= 0")
        if self.mcm_scale_control and self.use_mcm:
            raise ValueError("mcm_scale_control is the control of the w/o MCM ablation: set use_mcm: false with it")

    @property
    def n_streams(self) -> int:
        return 2 if self.subtitle_dim > 0 else 1

    def with_inputs(self, visual_dim: int, subtitle_dim: int, query_dim: int) -> MINUTEConfig:
        return replace(self, visual_dim=visual_dim, subtitle_dim=subtitle_dim, query_dim=query_dim)
