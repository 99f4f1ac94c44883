"""The omega-step's objective (``dlmsvdd.training.margin_loss``): the margin-violation loss against a
loop, the shares of rows violating their margins against numpy, and those shares in a fit's history."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlmsvdd import datasets, tasks
from dlmsvdd.training.config import TrainConfig
from dlmsvdd.training.margin_loss import margin_violation_loss, violation_counts, violation_shares
from dlmsvdd.training.trainer import DLMSVDD


def test_margin_violation_loss_against_a_loop_and_its_hinge_limit():
    g = torch.Generator().manual_seed(0)
    f = torch.rand(20, generator=g, dtype=torch.float64) * 2
    t = torch.tensor([1] * 14 + [-1] * 6)
    b_n, b_a = 0.7, 1.1
    for scale, power in ((1.0, 2.0), (4.0, 1.0), (0.5, 2.0)):  # the paper's softplus, then sharper / softer
        normal = [(np.log1p(np.exp(scale * (float(f[i]) - b_n))) / scale) ** power for i in range(20) if t[i] > 0]
        anomalous = [(np.log1p(np.exp(scale * (b_a - float(f[i])))) / scale) ** power for i in range(20) if t[i] < 0]
        expected = np.mean(normal) + np.mean(anomalous)
        assert float(margin_violation_loss(f, t, b_n, b_a, power, scale)) == pytest.approx(expected, rel=1e-12)
    only_normal = margin_violation_loss(f[:14], t[:14], b_n, b_a, 1.0)
    assert float(only_normal) == pytest.approx(float(F.softplus(f[:14] - b_n).mean()), rel=1e-12)
    # a sharp softplus is the hinge: only the violations count (within log(2) / scale of it)
    hinge = np.maximum(f[:14].numpy() - b_n, 0).mean() + np.maximum(b_a - f[14:].numpy(), 0).mean()
    assert float(margin_violation_loss(f, t, b_n, b_a, 1.0, 1e4)) == pytest.approx(hinge, abs=2 * np.log(2) / 1e4)


def test_violation_counts_and_shares_against_numpy():
    """A normal row violates when f > b_N, an anomalous one when f < b_A (the loss's hinge points);
    counts summed over batches give the epoch's shares, None for a class no batch held."""
    rng = np.random.default_rng(0)
    f = rng.uniform(0, 2, 50)
    t = np.where(rng.uniform(size=50) < 0.7, 1, -1)
    b_n, b_a = 0.8, 1.3
    total = torch.zeros(4, dtype=torch.float64)
    for part in np.array_split(np.arange(50), 3):  # three batches, summed as the omega-step sums them
        total += violation_counts(torch.tensor(f[part], dtype=torch.float32), torch.tensor(t[part]), b_n, b_a)
    normal, anomalous = f[t > 0], f[t < 0]
    assert total.tolist() == [len(normal), (normal > b_n).sum(), len(anomalous), (anomalous < b_a).sum()]
    shares = violation_shares(total)
    assert shares == {"violating_normal": pytest.approx((normal > b_n).mean(), abs=1e-15),
                      "violating_anomalous": pytest.approx((anomalous < b_a).mean(), abs=1e-15)}
    only_normal = violation_counts(torch.tensor(normal), torch.ones(len(normal)), b_n, b_a)
    assert violation_shares(only_normal)["violating_anomalous"] is None


def test_a_fit_records_each_epochs_violating_shares():
    """Every omega-step's row holds the shares of the epoch's rows violating their margins; a fit
    without labels has no anomalous share. At the paper's recipe on digits b_N comes out below 0
    (every normal row carries slack, the dual's valid solution), and as f, a squared distance in the
    kernel's space, is never below 0, every normal row then violates its margin."""
    def fit(ratio):
        task = tasks.make_task(datasets.digits(), normal_class=4, ratio=ratio, seed=0)
        config = TrainConfig(backbone="small_cnn", weights=None, recipe="paper", epochs=3, lr=1e-3, batch_size=64,
                             n_components=64, verbose=0)
        return DLMSVDD(config).fit(task.train, task.val).history_[:-1]  # the last row: no omega-step

    rows = fit(0.5)
    assert len(rows) == 3 and all(0 <= row["violating_anomalous"] <= 1 for row in rows)
    assert all(row["b_normal"] < 0 for row in rows) and [row["violating_normal"] for row in rows] == [1.0] * 3
    assert [row["violating_anomalous"] for row in fit(0.0)] == [None] * 3
