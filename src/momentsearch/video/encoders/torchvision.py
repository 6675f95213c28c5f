"""``torchvision:NAME``: a torchvision classification backbone (resnet50, efficientnet_b0, vit_b_16...)
with its classifier replaced by the identity, so a clip's vector is the mean of its frames' pooled
features. Weights from a local file (``weights=FILE``: a state dict of the full classifier, as
torchvision saves them) or torchvision's own after ``@`` (``torchvision:resnet50@DEFAULT``), which
torchvision downloads on a machine with internet. ImageNet's mean and std, 224 x 224 input
(``size=`` to change)."""

from __future__ import annotations

from typing import Any

from momentsearch.errors import EncoderError
from momentsearch.video.encoders.base import register_encoder
from momentsearch.video.encoders.torch_frames import TorchFrameEncoder, file_sha1


def import_torchvision() -> Any:
    try:
        import torchvision
    except Exception as e:  # noqa: BLE001 - a torchvision built for another torch fails in many ways
        raise EncoderError(f"the torchvision encoder needs a torchvision that loads beside this torch "
                           f"({type(e).__name__}: {str(e)[:200]})") from None
    return torchvision


def _strip_classifier(net: Any) -> Any:
    import torch

    for attr in ("fc", "classifier", "heads", "head"):
        if hasattr(net, attr):
            setattr(net, attr, torch.nn.Identity())
            return net
    raise EncoderError(f"torchvision model {type(net).__name__}: no classifier (fc, classifier, heads) to remove")


@register_encoder
class TorchvisionEncoder(TorchFrameEncoder):
    kind = "torchvision"
    version = 1

    def __init__(self, arch: str = "", weights: str = "", random: bool = False, size: int = 224, seed: int = 0,
                 **options: Any):
        super().__init__(arch, weights, **options)
        tv = import_torchvision()
        name, _, tag = arch.partition("@")
        if name not in tv.models.list_models(module=tv.models):
            raise EncoderError(f"torchvision has no classification model {name!r} (e.g. resnet50, efficientnet_b0)")
        if weights and tag:
            raise EncoderError(f"torchvision:{name}: give a weights file or @TAG, not both")
        if not (weights or tag or random):
            raise EncoderError(f"torchvision:{name}: no weights. Give a local file (--encoder-weights FILE) or "
                               f"torchvision:{name}@DEFAULT (downloaded by torchvision on a machine with internet)")
        self.torch.manual_seed(seed)
        try:
            net = tv.models.get_model(name, weights=tag or None)
            if weights:
                net.load_state_dict(self.torch.load(weights, map_location="cpu", weights_only=True))
        except EncoderError:
            raise
        except Exception as e:  # noqa: BLE001
            raise EncoderError(f"torchvision:{name}: cannot load the weights {weights or tag!r} "
                               f"({type(e).__name__}: {str(e)[:300]})") from None
        self.arch = name
        self.weights_id = f"sha1:{file_sha1(weights)}" if weights else (f"tag:{tag}" if tag else "random")
        self.seed = seed
        self.size = int(size)
        self.net = _strip_classifier(net).eval().to(self.device)

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"weights": self.weights_id, "size": self.size}
        if self.weights_id == "random":
            out["seed"] = self.seed
        return out
