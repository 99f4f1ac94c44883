"""The alpha-step's measurements: build and solve seconds of LpSVDD, the trainer's
per-epoch rows and timing summary, and the measured pass's peak memory."""

import time
import warnings

import numpy as np
import pytest

from dlmsvdd import datasets, tasks
from dlmsvdd.experiments import run_outputs as reports
from dlmsvdd.training.config import TrainConfig
from dlmsvdd.training.trainer import DLMSVDD
from sklearn.exceptions import ConvergenceWarning

from dlmsvdd_ext import LpSVDD


@pytest.mark.parametrize("kernel", ["exact", "rff"])
def test_lpsvdd_times_its_build_and_solve(kernel):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 8))
    y = np.r_[np.ones(250), -np.ones(50)]
    start = time.perf_counter()
    model = LpSVDD(kernel=kernel, n_components=64, gamma=0.1).fit(X, y)
    wall = time.perf_counter() - start
    assert model.build_seconds_ > 0 and model.solve_seconds_ > 0
    assert model.build_seconds_ + model.solve_seconds_ <= wall
    if kernel == "exact":  # scored against the support features
        np.testing.assert_array_equal(model.support_vectors_.numpy(), X[model.support_])
    else:  # scored through the map: no copy of the features is kept
        assert model.support_vectors_ is None


@pytest.fixture(scope="module")
def trained():
    task = tasks.make_task(datasets.digits(), normal_class=2, ratio=0.5, seed=0)
    cfg = TrainConfig(backbone="small_cnn", weights=None, epochs=2, lr=1e-3, batch_size=64, verbose=0)
    return DLMSVDD(cfg).fit(task.train, task.val), task


def test_history_rows_and_timing_summary_carry_build_and_solve(trained):
    model, _ = trained
    for row in model.history_:
        assert 0 < row["seconds_build"] and 0 < row["seconds_solve"]
        assert row["seconds_build"] + row["seconds_solve"] <= row["seconds_alpha"]
    summary = reports.timing_summary(model.history_)
    for step in ("build", "solve", "alpha", "omega"):
        values = [row[f"seconds_{step}"] for row in model.history_ if f"seconds_{step}" in row]
        assert summary[f"mean_seconds_{step}"] == pytest.approx(sum(values) / len(values), rel=1e-12)
    assert len([row for row in model.history_ if "seconds_omega" in row]) == 2  # no omega-step after the last epoch


def test_measured_alpha_step_holds_the_kernel_it_builds(trained):
    model, task = trained
    before = model.svdd_.objective_
    exact = model.measure_alpha_step(task.train)
    n, d = exact["n_train"], exact["n_features"]
    assert n == len(task.train) and d == 4 * 128 + 1  # the small CNN's features (4 branches, 32 wide), the guard
    assert exact["full_kernel_bytes"] == n * n * 4  # float32 features
    # the exact kernel is materialised: the peak holds at least the n x n float32 matrix
    assert exact["peak_bytes"] >= n * n * 4
    assert exact["rank"] is None and exact["build_seconds"] > 0 and exact["solve_seconds"] > 0
    assert model.svdd_.objective_ == before  # a separate pass: the model's boundary is untouched

    model.svdd_.set_params(kernel="rff", n_components=32)
    try:
        rff = model.measure_alpha_step(task.train)
    finally:
        model.svdd_.set_params(kernel="exact")
    assert rff["rank"] == 32
    assert n * 32 * 4 <= rff["peak_bytes"] < exact["peak_bytes"]  # the n x m factor, not n x n
    if model.device.type == "cpu":
        assert "profiler" in rff["memory_method"]
    assert isinstance(rff["peak_bytes"], int)


def test_measured_alpha_step_reports_its_certificate_without_warning(trained):
    """The measured pass records whether it was certified; it warned a second,
    raw ConvergenceWarning after training's aggregated one (fw_max_iter: 2)."""
    model, task = trained
    model.svdd_.set_params(max_iter=2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            short = model.measure_alpha_step(task.train)
    finally:
        model.svdd_.set_params(max_iter=1000)
    assert short["converged"] is False
    assert model.measure_alpha_step(task.train)["converged"] is True
