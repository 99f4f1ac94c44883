"""Backbones: torchvision ResNet-18/50 without the fc layer (ImageNet weights from
the local torch cache, a state-dict file such as DINO's, or none), a small CNN
for small images, an MLP for feature vectors, or any nn.Module. Features are
L2-normalised."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..data.sources import vision

BACKBONES = ("small_cnn", "mlp", "resnet18", "resnet50")
SMALL_CNN_WIDTH = 32  # the small CNN's first-block channels unless asked otherwise (TrainConfig.cnn_width)
SMALL_CNN_BRANCHES = 1  # its independent branches in models that predate TrainConfig.cnn_branches
SMALL_CNN_BRANCH_NORM = True  # each branch's features normalised apart, as in models that predate the field
SMALL_CNN_MIN_SIZE = 4  # the smallest image it takes: its two 2x2 max-pools leave 4 -> 2 -> 1 pixel
MLP_WIDTH, MLP_LAYERS = 128, 2  # the MLP's hidden width and hidden layers unless asked otherwise
RESNETS = {"resnet18": ("resnet18", "ResNet18_Weights", 512), "resnet50": ("resnet50", "ResNet50_Weights", 2048)}


class SmallCNN(nn.Module):
    """Three conv-BN-ReLU blocks (width, 2 width, 4 width channels), two max-pools,
    global average pooling: 4 width-d features for images of 4 pixels and more.

    ``branches`` > 1: that many such networks side by side, independent from their
    first convolution on (grouped convolutions), each one's features L2-normalised and
    all of them concatenated over sqrt(branches): the squared distance between two
    images' features is then the mean of the branches' squared distances, so the RBF
    kernel averages over independently initialised networks instead of depending on
    one draw (docs/user-guide/detector.md, "Recipes"). One branch is the plain small CNN, the
    same layers and weights.

    ``branch_norm`` False: the branches' features concatenated as they are (``FeatureNet``
    then normalises them as one vector), so training may weigh the branches unequally; with
    the branches normalised apart Deep SAD's training fell apart on CIFAR-10 (issue 50,
    docs/results/paper-protocol.md, "paper-protocol-branch-norm")."""

    def __init__(self, in_channels: int = 1, width: int = SMALL_CNN_WIDTH, branches: int = 1,
                 branch_norm: bool = True):
        super().__init__()

        def block(c_in, c_out, groups, pool):  # c_in: all branches' input channels; c_out: one branch's
            layers = [nn.Conv2d(c_in, branches * c_out, 3, padding=1, bias=False, groups=groups),
                      nn.BatchNorm2d(branches * c_out), nn.ReLU(inplace=True)]
            return layers + [nn.MaxPool2d(2)] if pool else layers

        self.branches = branches
        self.branch_norm = branch_norm
        # the image is shared (groups=1); from there each branch sees only its own channels
        self.layers = nn.Sequential(*block(in_channels, width, 1, True),
                                    *block(branches * width, 2 * width, branches, True),
                                    *block(branches * 2 * width, 4 * width, branches, False),
                                    nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.out_features = 4 * width * branches
        # channels-last weights and activations: the same arithmetic in another memory order, which
        # oneDNN's CPU convolutions run faster: a training step on 128 Fashion-MNIST images in 0.41-0.45 s
        # instead of 0.66-0.70, a features pass 0.12 s instead of 0.19-0.27 (width 32, 4 branches, one
        # thread; issue 50)
        self.to(memory_format=torch.channels_last)

    def forward(self, x):
        z = self.layers(x.contiguous(memory_format=torch.channels_last))
        if self.branches == 1 or not self.branch_norm:
            return z
        per_branch = F.normalize(z.unflatten(1, (self.branches, -1)), dim=2)
        return per_branch.flatten(1) / self.branches ** 0.5


def small_cnn_parameters(width: int, branches: int, in_channels: int = 3) -> int:
    """The number of parameters of ``SmallCNN(in_channels, width, branches)``, counted on
    the meta device (shapes without memory), so that one too large to build can be refused."""
    with torch.device("meta"):
        return sum(p.numel() for p in SmallCNN(in_channels, width, branches).parameters())
class MLP(nn.Module):
    """For feature vectors (N, D): ``layers`` hidden Linear-BatchNorm-ReLU blocks
    of ``width`` units, then a linear layer to width // 2 features. BatchNorm, as
    in the small CNN, lets step 0 (``pretrain.calibrate_batchnorm``) put the first
    epoch's features on the data's scale."""

    def __init__(self, in_features: int, width: int = MLP_WIDTH, layers: int = MLP_LAYERS):
        super().__init__()
        blocks, fan_in = [], in_features
        for _ in range(layers):
            blocks += [nn.Linear(fan_in, width, bias=False), nn.BatchNorm1d(width), nn.ReLU(inplace=True)]
            fan_in = width
        self.out_features = max(1, width // 2)
        self.layers = nn.Sequential(*blocks, nn.Linear(fan_in, self.out_features))

    def forward(self, x):
        return self.layers(x)


class FeatureNet(nn.Module):
    """backbone(x), flattened and L2-normalised: the representation phi(x); with a ``guard``
    (``dlmsvdd.training.guard``) one more coordinate, zero for rows within the training data's
    radius, that grows with a row's distance beyond it."""

    def __init__(self, backbone: nn.Module, guard: nn.Module | None = None):
        super().__init__()
        self.backbone = backbone
        self.guard = guard

    def features(self, x):
        """The learned features alone: backbone(x), flattened and L2-normalised."""
        if self.guard is not None:  # a finite input however far out
            x = x.clamp(-self.guard.limit, self.guard.limit)
        return F.normalize(self.backbone(x).flatten(1), dim=1)

    def forward(self, x):
        if self.guard is None:
            return self.features(x)
        return torch.cat([self.features(x), self.guard(x)], dim=1)


def _strip(state: dict) -> dict:
    """Unwraps {'state_dict': ...}-style files and DDP / DINO prefixes; drops the fc layer."""
    for key in ("state_dict", "model", "teacher"):
        if isinstance(state.get(key), dict):
            state = state[key]
    out = {}
    for k, v in state.items():
        for prefix in ("module.", "backbone."):
            k = k[len(prefix):] if k.startswith(prefix) else k
        if not k.startswith("fc."):
            out[k] = v
    return out


def load_weights(model: nn.Module, path) -> None:
    """Loads a state-dict file into model; ValueError when they do not match."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"weights file {str(path)!r} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the user's error to fix
        raise ValueError(f"cannot read weights from {str(path)!r}: {err}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{str(path)!r} does not hold a state dict")
    state = _strip(state)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = sorted(k for k in set(own) & set(state) if tuple(own[k].shape) != tuple(state[k].shape))
    if missing or unexpected or shapes:
        raise ValueError(f"the weights in {str(path)!r} do not match the {type(model).__name__} backbone: "
                         f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected "
                         f"{unexpected[:5]}{'...' if len(unexpected) > 5 else ''}, wrong shape {shapes[:5]}")
    model.load_state_dict(state)


def imagenet_weights_path(name: str) -> Path:
    """Where torchvision keeps the ImageNet weights of a ResNet in the torch cache."""
    tvm = vision("torchvision.models", f"the {name} backbone")

    url = getattr(tvm, RESNETS[name][1]).IMAGENET1K_V1.url
    return Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[1]


def build_backbone(name: str, weights: str | None = None, in_channels: int = 3, cnn_width: int = SMALL_CNN_WIDTH,
                   cnn_branches: int = SMALL_CNN_BRANCHES, cnn_branch_norm: bool = SMALL_CNN_BRANCH_NORM,
                   mlp_width: int = MLP_WIDTH, mlp_layers: int = MLP_LAYERS) -> tuple[nn.Module, int]:
    """(backbone without its classifier, feature dimension). weights: None,
    "imagenet" (from the local torch cache; never downloaded) or a state-dict file.
    in_channels: the images' channels, or the vectors' length for the MLP.
    cnn_width, cnn_branches, cnn_branch_norm: the small CNN's (SmallCNN's width, branches and
    branch_norm);
    mlp_width, mlp_layers: the MLP's; the ResNets have their own."""
    if name in ("small_cnn", "mlp"):
        if name == "small_cnn":
            model = SmallCNN(in_channels, cnn_width, cnn_branches, cnn_branch_norm)
        else:
            model = MLP(in_channels, mlp_width, mlp_layers)
        if weights == "imagenet":
            raise ValueError(f"the {name} backbone has no ImageNet weights; use weights=None or a state-dict file")
        if weights is not None:
            load_weights(model, weights)
        return model, model.out_features
    if name not in RESNETS:
        raise ValueError(f"unknown backbone {name!r}; choose one of {BACKBONES} or pass an nn.Module")
    if in_channels != 3:
        raise ValueError(f"{name} takes 3-channel images, got {in_channels}")
    tvm = vision("torchvision.models", f"the {name} backbone")
    builder, _, dim = RESNETS[name]
    model = getattr(tvm, builder)(weights=None)
    model.fc = nn.Identity()
    if weights == "imagenet":
        path = imagenet_weights_path(name)
        if not path.is_file():
            raise ValueError(f"ImageNet weights for {name} are not in the torch cache ({path}); put the file "
                             "there, pass a state-dict file, or use weights=None")
        weights = path
    if weights is not None:
        load_weights(model, weights)
    return model, dim

