"""BatchAugment (dlmsvdd.data.augment) against torchvision's RandomCrop(padding=4) and horizontal flip
applied image by image to the raw images before normalisation, and the augmented view of a task
on a tensor source."""

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF

from dlmsvdd import datasets, tasks
from dlmsvdd.data.augment import BatchAugment
from dlmsvdd.training import batches

MEAN, STD = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)


def _normalise(raw):
    return (raw - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)


def _reference(raw, top, left, flip):
    """torchvision, one raw image at a time: pad with black, crop, flip; then normalise."""
    out = []
    for image, i, j, f in zip(raw, top.tolist(), left.tolist(), flip.tolist()):
        crop = TF.crop(TF.pad(image, 4, fill=0), i, j, image.shape[1], image.shape[2])
        out.append(TF.hflip(crop) if f else crop)
    return _normalise(torch.stack(out))


def test_crop_flip_is_torchvisions_crop_and_flip_of_the_raw_image():
    raw = torch.rand(40, 3, 10, 12)
    augment = BatchAugment.for_normalisation("crop_flip", MEAN, STD)
    top, left, flip = augment.draw(40, torch.Generator().manual_seed(1))
    got = augment.apply(_normalise(raw), top, left, flip)
    torch.testing.assert_close(got, _reference(raw, top, left, flip), rtol=0, atol=1e-6)
    assert flip.any() and (~flip).any() and len(set(top.tolist())) > 3  # the cases the check covers


def test_a_call_draws_from_its_generator_and_repeats_with_its_seed():
    x = _normalise(torch.rand(16, 3, 8, 8))
    augment = BatchAugment.for_normalisation("crop_flip", MEAN, STD)
    first = augment(x, torch.Generator().manual_seed(5))
    expected = augment.apply(x, *augment.draw(16, torch.Generator().manual_seed(5)))
    assert torch.equal(first, expected) and torch.equal(first, augment(x, torch.Generator().manual_seed(5)))
    assert not torch.equal(first, augment(x, torch.Generator().manual_seed(6)))
    assert first.shape == x.shape and first.is_contiguous()


def test_offsets_cover_randomcrops_range_and_half_the_images_flip():
    augment = BatchAugment("crop_flip")
    top, left, flip = augment.draw(20000, torch.Generator().manual_seed(0))
    for offsets in (top, left):  # RandomCrop: randint(0, h + 2 * 4 - h + 1), 0..8 uniformly
        counts = torch.bincount(offsets, minlength=9)
        assert len(counts) == 9 and counts.min() > 20000 / 9 * 0.85
    assert abs(flip.float().mean().item() - 0.5) < 0.02  # 5.7 binomial standard deviations


def test_flip_alone_flips_some_images_and_moves_no_pixel_otherwise():
    x = torch.randn(64, 1, 6, 6)
    out = BatchAugment("flip")(x, torch.Generator().manual_seed(0))
    flipped = torch.tensor([torch.equal(o, i.flip(2)) for o, i in zip(out, x)])
    same = torch.tensor([torch.equal(o, i) for o, i in zip(out, x)])
    assert (flipped | same).all() and flipped.any() and same.any()


def test_one_fill_value_pads_every_channel_and_bad_input_is_refused():
    x = torch.zeros(1, 2, 4, 4)
    out = BatchAugment("crop_flip", fill=(-3.0,)).apply(x, torch.tensor([0]), torch.tensor([0]), torch.tensor([False]))
    assert torch.equal(out[0, :, :4, :4], torch.full((2, 4, 4), -3.0))  # the top-left crop is all padding
    with pytest.raises(ValueError, match="kind"):
        BatchAugment("rotate")
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        BatchAugment("flip")(torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="fill has 2 values"):
        BatchAugment("crop_flip", fill=(0.0, 1.0))(torch.zeros(2, 3, 4, 4))


def _cifar_like(tmp_path, n_train=60, n_test=20):
    rng = np.random.default_rng(0)
    path = tmp_path / "cifar10.npz"
    np.savez(path, X_train=rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8), y_train=np.arange(n_train) % 3,
             X_test=rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8), y_test=np.arange(n_test) % 3)
    return tmp_path


def test_the_augmented_view_of_a_tensor_task_augments_its_unaugmented_rows(tmp_path):
    source = datasets.load("cifar10", _cifar_like(tmp_path))  # cifar10.npz: crop and flip, as the paper's CIFAR
    task = tasks.make_task(source, 1, ratio=0.5, seed=0)
    view = task.train.augmented()
    assert view.unaugmented is task.train and view.batch_augment.kind == "crop_flip"
    assert batches.can_take(view) and batches.can_take(task.train)
    mean, std = datasets.STATS["cifar10"]
    np.testing.assert_allclose(view.batch_augment.fill, [-m / s for m, s in zip(mean, std)])
    rows = np.array([3, 0, 5])
    inputs, targets = view.take(rows, torch.Generator().manual_seed(2))
    plain, plain_targets = view.unaugmented.take(rows)
    assert torch.equal(inputs, view.batch_augment(plain, torch.Generator().manual_seed(2)))
    assert torch.equal(targets, plain_targets) and torch.equal(targets, torch.as_tensor(task.train.targets[rows]))
    assert view.augmented() is view and len(view) == len(task.train)
    torch.manual_seed(0)
    x, t = view[1]
    assert x.shape == (3, 32, 32) and t == task.train.targets[1]
    assert task.val.augmented() is task.val  # validation and test are never augmented


def test_tasks_without_augmentation_keep_their_view():
    task = tasks.make_task(datasets.digits(), 2, ratio=0.5, seed=0)
    assert task.train.augmented() is task.train
