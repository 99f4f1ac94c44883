"""Backbones: ResNets from torchvision with state-dict and cached ImageNet weights, the small CNN."""

import pytest
import torch
import torchvision

from dlmsvdd.training.models import FeatureNet, SmallCNN, build_backbone, imagenet_weights_path


def _prefixed_state(model, prefix):
    """A state dict as training scripts save it: wrapped, prefixed, with the fc layer."""
    return {"state_dict": {prefix + k: v for k, v in model.state_dict().items()}}


def test_resnet50_loads_a_state_dict_and_gives_2048_unit_features(tmp_path):
    torch.manual_seed(0)
    donor = torchvision.models.resnet50(weights=None)  # random weights, fc included
    torch.save(_prefixed_state(donor, "module."), tmp_path / "dino_like.pth")
    backbone, dim = build_backbone("resnet50", str(tmp_path / "dino_like.pth"))
    assert dim == 2048
    for k, v in backbone.state_dict().items():
        assert torch.equal(v, donor.state_dict()[k])
    net = FeatureNet(backbone).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        phi = net(x)
        donor.fc = torch.nn.Identity()
        expected = torch.nn.functional.normalize(donor.eval()(x), dim=1)
    assert phi.shape == (2, 2048)
    torch.testing.assert_close(phi.norm(dim=1), torch.ones(2))
    torch.testing.assert_close(phi, expected)


def test_weights_that_do_not_match_are_refused(tmp_path):
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "r18.pth")
    with pytest.raises(ValueError, match="do not match the ResNet backbone"):
        build_backbone("resnet50", str(tmp_path / "r18.pth"))
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read weights"):
        build_backbone("resnet18", str(tmp_path / "junk.pth"))
    with pytest.raises(ValueError, match="does not exist"):
        build_backbone("resnet18", str(tmp_path / "missing.pth"))
    with pytest.raises(ValueError, match="3-channel"):
        build_backbone("resnet18", None, in_channels=1)


def test_imagenet_weights_come_from_the_torch_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    with pytest.raises(ValueError, match="not in the torch cache"):
        build_backbone("resnet18", "imagenet")
    torch.manual_seed(1)
    cached = torchvision.models.resnet18(weights=None)
    path = imagenet_weights_path("resnet18")
    assert path.name == "resnet18-f37072fd.pth"  # torchvision's file name for IMAGENET1K_V1
    path.parent.mkdir(parents=True)
    torch.save(cached.state_dict(), path)
    backbone, dim = build_backbone("resnet18", "imagenet")
    assert dim == 512 and torch.equal(backbone.conv1.weight, cached.conv1.weight)


@pytest.mark.parametrize("size,channels", [(8, 1), (28, 1), (32, 3)])
def test_small_cnn_on_small_images(size, channels):
    backbone, dim = build_backbone("small_cnn", None, in_channels=channels)
    phi = FeatureNet(backbone)(torch.randn(3, channels, size, size))
    assert phi.shape == (3, dim) and isinstance(backbone, SmallCNN)
    torch.testing.assert_close(phi.norm(dim=1), torch.ones(3))
    with pytest.raises(ValueError, match="no ImageNet weights"):
        build_backbone("small_cnn", "imagenet")
