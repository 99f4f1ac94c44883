"""The stored preprocessing: Preprocess (the torch operations an export runs)
against torchvision's Pillow pipeline and against the tensor sources' formula."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlmsvdd import datasets, tasks
from dlmsvdd.data.preprocessing import Preprocessing



def _pil_reference(spec, pixels):
    """torchvision's Grayscale / Resize / ToTensor / Normalize on PIL images of uint8 pixels (N, H, W, C)."""
    from PIL import Image
    from torchvision import transforms as T

    steps = ([T.Grayscale(spec.channels)] if spec.channels != spec.channels_in else []) + \
        ([T.Resize(spec.size)] if spec.size else []) + [T.ToTensor(), T.Normalize(spec.mean, spec.std)]
    compose = T.Compose(steps)
    return torch.stack([compose(Image.fromarray(p[..., 0] if p.shape[-1] == 1 else p)) for p in pixels])


@pytest.mark.parametrize("size_in,size,channels_in,channels", [
    ((12, 12), (16, 16), 3, 3),  # upscale by 4/3
    ((32, 32), (224, 224), 3, 3),  # CIFAR to ImageNet size
    ((28, 28), (224, 224), 1, 3),  # Fashion-MNIST grey to RGB at ImageNet size
    ((40, 40), (20, 20), 1, 1),  # downscale by an integer factor
    ((10, 14), None, 3, 3),  # no resize
])
def test_pil_pipeline_is_pillows_to_the_pixel(size_in, size, channels_in, channels):
    rng = np.random.default_rng(0)
    mean, std = (0.5, 0.4, 0.3)[:channels], (0.2, 0.25, 0.3)[:channels]
    spec = Preprocessing(channels_in, size_in, channels, size, mean, std, "pil")
    pixels = rng.integers(0, 256, (6, *size_in, channels_in), dtype=np.uint8)
    ours = spec.module()(torch.from_numpy(pixels).permute(0, 3, 1, 2))
    np.testing.assert_allclose(ours.numpy(), _pil_reference(spec, pixels).numpy(), atol=1e-6)


def test_pil_pipeline_at_fractional_downscales_is_within_a_pixel_level():
    """Pillow's fixed-point filter weights are not reproduced: at a 2.5x downscale
    under 1% of the pixels end one level (1/255) away."""
    rng = np.random.default_rng(1)
    spec = Preprocessing(3, None, 3, (16, 16), (0.0,) * 3, (1.0,) * 3, "pil")
    pixels = rng.integers(0, 256, (6, 40, 40, 3), dtype=np.uint8)
    diff = (spec.module()(torch.from_numpy(pixels).permute(0, 3, 1, 2)) - _pil_reference(spec, pixels)).abs() * 255
    assert diff.max() < 1 + 1e-3 and (diff > 0.5).float().mean() < 0.01


def test_tensor_pipeline_is_the_digits_transform():
    """Digits (a tensor source) at ImageNet size on 3 channels: repeat the grey
    channel, bilinear resize, normalise, as the formula reads."""
    source = datasets.digits()
    task = tasks.make_task(source, normal_class=2, channels=3, image_size=32, imagenet_stats=True)
    spec = task.train.preprocessing
    assert (spec.channels_in, spec.size_in, spec.channels, spec.size, spec.pipeline) == (1, (8, 8), 3, (32, 32),
                                                                                         "tensor")
    raw = source.train.images[:5]
    mean = torch.tensor(datasets.IMAGENET_STATS[0]).view(1, 3, 1, 1)
    std = torch.tensor(datasets.IMAGENET_STATS[1]).view(1, 3, 1, 1)
    expected = (F.interpolate(raw.repeat(1, 3, 1, 1), size=(32, 32), mode="bilinear", align_corners=False)
                - mean) / std
    np.testing.assert_allclose(spec.module()(raw).numpy(), expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(task.train[0][0].numpy(), expected[task.train.split.indices[0]].numpy(), atol=1e-6)


def test_round_trip_and_bad_records():
    spec = Preprocessing(1, (8, 8), 3, (224, 224), (0.4, 0.4, 0.4), (0.2, 0.2, 0.2), "tensor")
    assert Preprocessing.from_dict(spec.to_dict()) == spec
    assert spec.input_shape == (3, 224, 224)
    with pytest.raises(ValueError, match="only grey images are converted"):
        Preprocessing(3, (8, 8), 1, None, (0.5,), (0.2,))
    with pytest.raises(ValueError, match="mean and std need 3 values"):
        Preprocessing(3, (8, 8), 3, None, (0.5,), (0.2,))
    with pytest.raises(ValueError, match="must be resized to one size"):
        Preprocessing(3, None, 3, None, (0.5,) * 3, (0.2,) * 3)
