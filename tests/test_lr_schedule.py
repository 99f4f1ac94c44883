"""The omega-step's learning-rate schedule (TrainConfig.lr_schedule, training.lr_schedule)."""

import math

import numpy as np
import pytest
import torch

from dlmsvdd import DLMSVDD, TrainConfig
from dlmsvdd.training import lr_schedule

FAST = dict(epochs=4, batch_size=64, verbose=0, seed=0, input_consensus=False)


def test_cosine_rates_against_the_formula():
    epochs = 9
    expected = [1e-3 * (1 + np.cos(np.pi * (e + 0.5) / epochs)) / 2 for e in range(epochs)]
    got = [lr_schedule.rate(1e-3, "cosine", e, epochs) for e in range(epochs)]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got == sorted(got, reverse=True) and 0 < got[-1] < 1e-3 * 0.01 and got[0] < 1e-3
    assert sum(got) == pytest.approx(epochs * 1e-3 / 2)  # half the constant schedule's total step
    assert [lr_schedule.rate(1e-3, "constant", e, epochs) for e in range(epochs)] == [1e-3] * epochs
    with pytest.raises(ValueError, match="choose from"):
        lr_schedule.rate(1e-3, "step", 0, epochs)


def test_the_fit_trains_each_epoch_at_its_rate():
    """History rows carry the rate each omega-step ran at; Adam's groups hold it while it runs."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 5)).astype(np.float32)
    y = np.where(np.arange(240) < 24, -1, 1)
    seen = []
    original = lr_schedule.apply

    def spy(optimizer, *args):
        lr = original(optimizer, *args)
        seen.append([group["lr"] for group in optimizer.param_groups])
        return lr

    lr_schedule.apply = spy
    try:
        model = DLMSVDD(**FAST, lr=2e-3, lr_schedule="cosine").fit(X, y)
    finally:
        lr_schedule.apply = original
    rates = [2e-3 * (1 + math.cos(math.pi * (e + 0.5) / 4)) / 2 for e in range(4)]
    assert [row["lr"] for row in model.history_[:-1]] == pytest.approx(rates, rel=1e-12)
    assert "lr" not in model.history_[-1]  # the last epoch validates and trains no more
    assert [groups[0] for groups in seen] == pytest.approx(rates, rel=1e-12)
    constant = DLMSVDD(**FAST, lr=2e-3, lr_schedule="constant").fit(X, y)
    assert [row["lr"] for row in constant.history_[:-1]] == [2e-3] * 4
    # the two schedules train different networks from the same seed
    assert not np.array_equal(model.dissimilarity(X), constant.dissimilarity(X))


def test_the_recipe_decides_and_a_value_given_wins():
    assert TrainConfig(recipe="paper").training_params(False)["lr_schedule"] == "constant"
    for recipe in ("paper", "scratch"):
        assert TrainConfig(recipe=recipe, lr_schedule="cosine").training_params(False)["lr_schedule"] == "cosine"
    with pytest.raises(ValueError, match="lr_schedule"):
        DLMSVDD(**FAST, lr_schedule="linear").fit(np.zeros((40, 3), np.float32))


def test_a_resumed_cosine_fit_trains_as_one_left_alone(tmp_path):
    """The rate is a function of the epoch alone: a fit checkpointed and resumed mid-way ends with the
    same network as one never stopped."""
    rng = np.random.default_rng(1)
    X = torch.from_numpy(rng.normal(size=(200, 4)).astype(np.float32))
    y = np.where(np.arange(200) < 20, -1, 1)
    whole = DLMSVDD(**FAST, lr_schedule="cosine").fit(X, y)
    checkpoint = tmp_path / "state.pt"
    stopped = DLMSVDD(**FAST, lr_schedule="cosine")
    calls = []

    def stop_after_two(row):
        calls.append(row["epoch"])
        if row["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped.fit(X, y, callback=stop_after_two, checkpoint=checkpoint)
    assert calls == [0, 1] and torch.load(checkpoint, weights_only=False)["next_epoch"] == 1
    resumed = DLMSVDD(**FAST, lr_schedule="cosine").fit(X, y, checkpoint=checkpoint, resume=True)
    np.testing.assert_array_equal(resumed.dissimilarity(X), whole.dissimilarity(X))
