"""Training rows held on the device (issue 47): the held path gives the loader path's batches, hence
on the CPU the same model bit for bit; the precision options train; the TF32 policy's flags."""

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks
from dlmsvdd.training import batches, precision, resident


@pytest.fixture(scope="module")
def task():
    return tasks.make_task(datasets.digits(), normal_class=2, ratio=0.1, seed=0)


def _config(**kw):
    return TrainConfig(**{**dict(backbone="small_cnn", weights=None, epochs=3, batch_size=32, verbose=0,
                                 device="cpu"), **kw})


@pytest.mark.parametrize("drop_last", [False, True])
def test_held_batches_are_the_loaders(drop_last):
    x = torch.arange(70, dtype=torch.float32)[:, None] * torch.ones(1, 3)
    t = torch.where(torch.arange(70) % 7 == 0, -1, 1)
    held = resident.ResidentRows(x, t)
    for seed in (0, 5):
        ours = list(held.shuffled(16, seed, drop_last))
        theirs = list(batches.loader(TensorDataset(x, t), 16, shuffle=True, seed=seed, drop_last=drop_last))
        assert len(ours) == len(theirs)
        for (a, ta), (b, tb) in zip(ours, theirs):
            assert torch.equal(a, b) and torch.equal(ta, tb)
    ordered = list(held.in_order(32))
    assert torch.equal(torch.cat([b for b, _ in ordered]), x) and len(ordered) == 3


def test_held_rows_train_the_same_model_as_the_loader(task, monkeypatch):
    held = DLMSVDD(_config()).fit(task.train, task.val)
    monkeypatch.setattr(resident, "budget_bytes", lambda device: 0)  # nothing held: the data loader's path
    loaded = DLMSVDD(_config()).fit(task.train, task.val)
    assert [r["omega_batch_losses"] for r in held.history_[:-1]] == [r["omega_batch_losses"] for r in loaded.history_[:-1]]
    np.testing.assert_array_equal(held.dissimilarity(task.test), loaded.dissimilarity(task.test))


def test_an_augmented_view_without_a_batch_transform_is_not_held(task):
    class PerImage(TensorDataset):
        def augmented(self):
            return TensorDataset(*self.tensors)  # stands for a PIL pipeline: no batch_augment

    data = PerImage(torch.zeros(4, 1, 8, 8), torch.ones(4))
    assert resident.augmentation_of(data) == (False, None)
    assert resident.augmentation_of(task.train) == (True, None)  # digits: no augmentation


def test_a_batch_augmentation_runs_on_the_held_rows():
    calls = []

    def flip(x, generator):
        calls.append(generator)
        return x.flip(-1)

    held = resident.ResidentRows(torch.arange(12.0).reshape(3, 1, 1, 4), torch.ones(3), flip)
    (x, _), = held.shuffled(4, 0, drop_last=False)
    assert isinstance(calls[0], torch.Generator) and torch.equal(x.sum(0).flatten(), torch.arange(12.0).reshape(3, 4).sum(0).flip(-1))


@pytest.mark.parametrize("options", [dict(precision="bf16"), dict(channels_last=True), dict(precision="float32")])
def test_precision_options_train(task, options):
    model = DLMSVDD(_config(epochs=2, **options)).fit(task.train, task.val)
    f = model.dissimilarity(task.test)
    assert np.isfinite(f).all()
    # the fit leaves the network in the format it was built in: the small CNN's is channels-last (issue 50)
    assert precision.memory_format(model.network_) == torch.channels_last
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in model.network_.parameters() if p.dim() == 4)
    if options.get("precision") == "float32":  # on a CPU TF32 changes nothing
        np.testing.assert_array_equal(f, DLMSVDD(_config(epochs=2)).fit(task.train, task.val).dissimilarity(task.test))


def test_scoring_turns_tf32_off_and_restores_the_flags():
    if not precision.new_api():
        pytest.skip("torch before 2.9: legacy allow_tf32 flags")
    flags = (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
    before = [f.fp32_precision for f in flags]
    with precision.float32_products("tf32"):
        assert [f.fp32_precision for f in flags] == ["tf32"] * 3
        with precision.scoring():
            assert [f.fp32_precision for f in flags] == ["ieee"] * 3
        assert [f.fp32_precision for f in flags] == ["tf32"] * 3
    assert [f.fp32_precision for f in flags] == before


def test_reproducible_fits_take_cudnns_deterministic_algorithms_and_restore_the_flags():
    before = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    with precision.reproducible(True):
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    with precision.reproducible(False):
        assert (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark) == before
    assert (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark) == before


def test_a_networks_memory_format_is_read_from_its_convolution_weights():
    network = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 4, 1), torch.nn.Linear(4, 2))
    assert precision.memory_format(network) == torch.contiguous_format
    network.to(memory_format=torch.channels_last)
    assert precision.memory_format(network) == torch.channels_last  # the 1x1 kernel is both
    assert precision.memory_format(torch.nn.Linear(3, 2)) == torch.contiguous_format

