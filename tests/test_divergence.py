"""Training that breaks down stops: collapsed or non-finite features and a
non-finite loss roll back to the best earlier epoch with a warning (or raise),
and a "median" bandwidth is estimated once per fit."""

import json
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

import dlmsvdd_ext
from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks


@pytest.fixture(scope="module")
def task():
    return tasks.make_task(datasets.digits(), normal_class=0, ratio=0.1, seed=0)


def _config(**kw):
    base = dict(backbone="small_cnn", weights=None, epochs=4, batch_size=64, n_components=64, verbose=0)
    return TrainConfig(**{**base, **kw})


def _no_anomalies(split):
    """The validation set without its anomalies: no metric to select by, so the last epoch would be kept."""
    normal = np.flatnonzero(split.targets > 0)
    return torch.utils.data.Subset(split, normal)


@pytest.mark.parametrize("gamma", ["median", 2.5])
def test_a_collapsing_run_rolls_back_to_its_last_healthy_epoch(task, gamma):
    """lr 1e3 maps every training image to the zero vector after one omega-step
    (measured: 108 of 108 rows at epoch 1). Before: the collapsed last epoch was
    kept and saved without a word (or, with gamma 'median', re-estimated on the
    collapsed features, the run aborted: 'all training features coincide')."""
    from dlmsvdd.training.divergence import DivergenceWarning

    with pytest.warns(DivergenceWarning, match="training stopped at epoch 1: the training features collapsed"):
        model = DLMSVDD(_config(lr=1e3, gamma=gamma)).fit(task.train, _no_anomalies(task.val))
    assert model.best_epoch_ == 0 and len(model.history_) == 1
    assert len(model.warnings_) == 1 and "keeping epoch 0" in model.warnings_[0]
    # epoch 0 is the untrained network: the model is the one a run of no epochs gives
    untrained = DLMSVDD(_config(epochs=0, gamma=gamma)).fit(task.train, _no_anomalies(task.val))
    np.testing.assert_array_equal(model.dissimilarity(task.test), untrained.dissimilarity(task.test))


def test_on_divergence_error_raises(task):
    from dlmsvdd.training.divergence import TrainingDiverged

    with pytest.raises(TrainingDiverged, match="training diverged at epoch 1: the training features collapsed"):
        DLMSVDD(_config(lr=1e3, gamma=2.5, on_divergence="error")).fit(task.train, task.val)


class NaNWhenTraining(nn.Module):
    """A small CNN whose training-mode output is NaN (eval-mode features stay finite)."""

    def __init__(self):
        from dlmsvdd.training.models import SmallCNN

        super().__init__()
        self.net = SmallCNN(1, width=8)

    def forward(self, x):
        out = self.net(x)
        return out * float("nan") if self.training else out


class NaNAlways(NaNWhenTraining):
    def forward(self, x):
        return self.net(x) * float("nan")


def test_a_non_finite_loss_stops_before_any_step(task):
    from dlmsvdd.training.divergence import DivergenceWarning

    torch.manual_seed(0)
    backbone = NaNWhenTraining()
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    with pytest.warns(DivergenceWarning, match=r"epoch 0: the omega-step's features or loss are not finite"):
        model = DLMSVDD(_config(), backbone=backbone).fit(task.train, task.val)
    assert model.best_epoch_ == 0 and len(model.history_[0]["omega_batch_losses"]) == 1
    after = model.network_.backbone.state_dict()  # on the model's device (the backbone module moved with it)
    assert {v.device for v in after.values()} == {model.device}
    assert all(torch.equal(before[k], after[k].cpu()) for k in before if "num_batches" not in k and "running" not in k)
    assert np.isfinite(model.dissimilarity(task.test)).all()


def test_non_finite_initial_features_raise(task):
    from dlmsvdd.training.divergence import TrainingDiverged

    with pytest.raises(TrainingDiverged, match="the initial network's .* not finite"):
        DLMSVDD(_config(), backbone=NaNAlways()).fit(task.train, task.val)


def test_the_median_bandwidth_is_estimated_once(task, monkeypatch):
    """Before: the trainer evaluated the median at every epoch (and kept the first)."""
    calls = []
    median = dlmsvdd_ext.ops.median_sq_distance
    monkeypatch.setattr(dlmsvdd_ext.ops, "median_sq_distance", lambda *a, **k: calls.append(1) or median(*a, **k))
    model = DLMSVDD(_config(lr=1e-3, epochs=3, gamma="median")).fit(task.train, task.val)
    assert len(calls) == 1
    assert len({row["gamma"] for row in model.history_}) == 1
    assert model.svdd_.gamma_ == model.history_[0]["gamma"]  # the refit on the best weights keeps it too


def test_the_warning_reaches_metrics_json(tmp_path, capsys):
    from dlmsvdd.cli import main

    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["train", "--backbone", "small_cnn", "--weights", "none", "--epochs", "3", "--lr", "1e3",
                     "--gamma", "2.5", "--verbose", "0", "--output", str(out)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["best_epoch"] == 0 and len(result["warnings"]) == 1
    assert "training stopped at epoch 1" in result["warnings"][0]
    assert "training stopped at epoch 1" in (out / "log.txt").read_text()
