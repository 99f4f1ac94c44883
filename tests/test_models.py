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


def test_one_branch_is_the_plain_small_cnn():
    """branches=1 builds the small CNN of before: its layers, parameter names and, from the
    same seed, its weights and features."""
    torch.manual_seed(3)
    plain = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    torch.manual_seed(3)
    net = SmallCNN(1, width=8, branches=1)
    assert {"layers." + k: v.shape for k, v in plain.state_dict().items()} == {k: v.shape for k, v in net.state_dict().items()}
    for k, v in plain.state_dict().items():
        assert torch.equal(net.state_dict()["layers." + k], v)
    x = torch.randn(4, 1, 8, 8)
    # the small CNN runs in channels-last memory order: the plain network in that order, to the bit,
    # and in the default order up to the sums' rounding
    torch.testing.assert_close(net(x), plain(x), rtol=1e-5, atol=1e-6)
    plain.to(memory_format=torch.channels_last)
    torch.testing.assert_close(net(x), plain(x.contiguous(memory_format=torch.channels_last)), rtol=0, atol=0)
    assert net.out_features == 32


def _branches_and_plain_parts(branches: int, branch_norm: bool = True):
    """A K-branch small CNN with BatchNorm statistics other than the initial ones (eval mode), its
    features of 5 images, and each branch's raw features computed by a plain small CNN that holds
    that branch's slice of the weights."""
    torch.manual_seed(0)
    net = SmallCNN(3, width=4, branches=branches, branch_norm=branch_norm)
    for m in net.modules():  # BatchNorm with statistics other than the initial ones, in eval mode
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5), m.bias.data.uniform_(-0.5, 0.5)
    net.eval()
    state = net.state_dict()
    x = torch.randn(5, 3, 12, 12)
    with torch.no_grad():
        phi = net(x)
        parts = []
        for b in range(branches):
            plain = SmallCNN(3, width=4).eval()
            own = {}
            for k, v in plain.state_dict().items():
                whole = state[k]
                own[k] = whole if v.dim() == 0 else whole.reshape(branches, *v.shape)[b]  # num_batches_tracked
            plain.load_state_dict(own)
            parts.append(plain(x))
    return net, phi, parts


@pytest.mark.parametrize("branches", [2, 4])
def test_branches_are_independent_small_cnns_whose_squared_distances_average(branches):
    """Each branch of a K-branch small CNN is a plain small CNN with its slice of the weights;
    the features are the branches' unit features over sqrt(K), so a squared distance between
    two images is the mean of the branches' squared distances."""
    net, phi, raw = _branches_and_plain_parts(branches)
    parts = [torch.nn.functional.normalize(p, dim=1) for p in raw]
    assert net.out_features == branches * 16 and phi.shape == (5, branches * 16)
    torch.testing.assert_close(phi, torch.cat(parts, dim=1) / branches ** 0.5, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(phi.norm(dim=1), torch.ones(5))
    d2 = torch.cdist(phi, phi) ** 2
    mean_d2 = torch.stack([torch.cdist(p, p) ** 2 for p in parts]).mean(0)
    torch.testing.assert_close(d2, mean_d2, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("branches", [1, 3])
def test_branches_unnormalised_are_the_plain_cnns_features_side_by_side(branches):
    """branch_norm=False: the branches' raw features concatenated (FeatureNet then normalises the
    whole vector, so a branch with larger features weighs more); one branch is the same either way."""
    net, phi, raw = _branches_and_plain_parts(branches, branch_norm=False)
    torch.testing.assert_close(phi, torch.cat(raw, dim=1), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        unit = FeatureNet(net)(torch.randn(4, 3, 12, 12))
    torch.testing.assert_close(unit.norm(dim=1), torch.ones(4))
    normalised = SmallCNN(3, width=4, branches=branches, branch_norm=True)
    normalised.load_state_dict(net.state_dict())
    x = torch.randn(4, 3, 12, 12)
    with torch.no_grad():
        same = torch.equal(normalised.eval()(x), net(x))
    assert same == (branches == 1)  # the same weights: only the features' normalisation differs
