"""The torchvision and open_clip encoders (and the clip family's open_clip text tower) on small, randomly
initialised models saved as weights files, against the libraries' own forward passes.

They run wherever torchvision loads beside the installed torch. They are skipped on this project's CPU
machines: PyPI's torchvision is built against CUDA torch, and next to the CPU torch wheel its C
extension does not load and ``import torchvision`` fails ("operator torchvision::nms does not exist"),
which takes open_clip with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from momentsearch.errors import EncoderError
from momentsearch.video.encoders import create_encoder


def _loads(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # noqa: BLE001 - ImportError, or a torchvision built for another torch
        return False
    return True


NO_TV = "no torchvision that loads beside this torch (PyPI's is a CUDA build; this machine has the CPU torch wheel)"
FRAMES = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)


def _pixels(mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    x = torch.from_numpy(FRAMES).permute(0, 3, 1, 2).float() / 255
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


@pytest.mark.skipif(not _loads("torchvision"), reason=NO_TV)
def test_torchvision_backbone_from_a_weights_file(tmp_path: Path) -> None:
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.resnet18().eval()
    torch.save(net.state_dict(), tmp_path / "r18.pt")
    enc = create_encoder("torchvision:resnet18", weights=str(tmp_path / "r18.pt"), size=32)
    net.fc = torch.nn.Identity()
    with torch.no_grad():
        want = net(_pixels((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))).mean(0).numpy()
    got = enc.encode([FRAMES])
    assert got.shape == (1, 512) and enc.dim == 512
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
    assert enc.identity()["config"]["weights"].startswith("sha1:")
    with pytest.raises(EncoderError, match="no classification model 'resnet_nine'"):
        create_encoder("torchvision:resnet_nine", random=True)
    with pytest.raises(EncoderError, match="no weights"):
        create_encoder("torchvision:resnet18")


@pytest.mark.skipif(not _loads("open_clip"), reason=NO_TV + "; open_clip imports torchvision")
def test_open_clip_image_and_text_towers_from_a_weights_file(tmp_path: Path) -> None:
    import open_clip

    from momentsearch.models.clip.family import CLIPFamily

    cfg = {"embed_dim": 16,
           "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32, "patch_size": 8},
           "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}
    (tmp_path / "Tiny-ViT.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(tmp_path / "Tiny-ViT.json")
    torch.manual_seed(0)
    model = open_clip.create_model("Tiny-ViT").eval()
    torch.save(model.state_dict(), tmp_path / "tiny.pt")
    enc = create_encoder("open_clip:Tiny-ViT", weights=str(tmp_path / "tiny.pt"))
    with torch.no_grad():
        f = model.encode_image(_pixels(enc.mean, enc.std), normalize=True).mean(0)
        tok = open_clip.get_tokenizer("Tiny-ViT")
        t = model.encode_text(tok(["a dog runs", "a red ball"]), normalize=True)
    np.testing.assert_allclose(enc.encode([FRAMES])[0], (f / f.norm()).numpy(), atol=1e-5)
    fam, tower, identity = CLIPFamily.pack("open_clip:Tiny-ViT", str(tmp_path / "tiny.pt"))
    assert identity == enc.identity() == fam.cfg.image_encoder and fam.cfg.context_length == 16
    assert float((tower.encode_text(["a dog runs", "a red ball"]) - t).abs().max()) < 1e-5
    assert not any(k.startswith("model.visual.") for k in tower.state_dict())  # the image tower is not carried


SIDE = Path(__file__).resolve().parents[1] / ".venv" / "vision-extra"  # `make setup` installs it when it can


@pytest.mark.skipif(_loads("torchvision") or not (SIDE / "open_clip").is_dir(),
                    reason="torchvision loads here (the tests above ran), or no side install of torchvision/open_clip")
@pytest.mark.slow
def test_the_backends_in_a_side_install_of_torchvision_and_open_clip() -> None:
    """On the CPU torch wheel: the two tests above, in a process that sees PyPI's torchvision and open_clip
    (installed without dependencies beside the venv) through the test-only shim in tests/vision_shim."""
    import os
    import subprocess
    import sys

    shim = Path(__file__).parent / "vision_shim"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), str(SIDE)])}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k",
                          "weights_file"], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "2 passed" in res.stdout, res.stdout[-3000:] + res.stderr[-2000:]
