"""The sharded alpha-step (dlmsvdd_ext.distributed) on 2 CPU processes with gloo,
against the single-process solvers on the whole set."""

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dlmsvdd_ext import LpSVDD, ops
from dlmsvdd_ext.distributed import shard_bounds

WORLD = 2
# (kernel, solver, max_iter, labels sorted so that rank 0 holds no anomaly)
CASES = [
    ("exact", "pairwise", 300, False),
    ("exact", "paper", 200, False),
    ("exact", "pairwise", 300, True),
    ("nystrom", "pairwise", 300, False),
    ("rff", "pairwise", 300, False),
    ("sorf", "paper", 200, True),
]
OPTIONS = {"n_components": 64, "random_state": 3, "tol": 1e-12}


def problem_data(sort_labels: bool):
    """301 samples (an uneven split) with 60 anomalies, and 40 test points."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(341, 6))
    X[:60] += 1.5
    y = np.where(np.arange(301) < 60, -1, 1)
    order = np.argsort(-y, kind="stable") if sort_labels else rng.permutation(301)
    return torch.from_numpy(X[:301][order]), torch.from_numpy(y[order]), torch.from_numpy(X[301:])


def fitted_summary(model: LpSVDD, X_test) -> dict:
    return {"objective": model.objective_, "gap": model.gap_, "b_normal": model.b_normal_,
            "b_anomaly": model.b_anomaly_, "gamma": model.gamma_, "n_iter": model.n_iter_,
            "alpha": torch.as_tensor(model.alpha_), "f_test": model.dissimilarity(X_test),
            "threshold_rule": model.threshold_rule_}


def _rank_main(rank: int, init_file: str, out_dir: str):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    results = {}
    X, y, X_test = problem_data(False)
    start, stop = shard_bounds(len(X), WORLD, rank)
    from dlmsvdd_ext import distributed

    shard = distributed.Shard(len(X))
    results["gather"] = shard.gather(X[start:stop])
    results["rows"] = shard.rows(X[start:stop], [300, 0, 151])
    results["median"] = distributed.median_sq_distance(X[start:stop], shard, max_samples=120, seed=5)
    for kernel, solver, max_iter, sort_labels in CASES:
        X, y, X_test = problem_data(sort_labels)
        model = LpSVDD(kernel=kernel, solver=solver, max_iter=max_iter, **OPTIONS)
        model.fit_sharded(X[start:stop], y[start:stop])
        results[(kernel, solver, max_iter, sort_labels)] = fitted_summary(model, X_test)
    torch.save(results, f"{out_dir}/rank{rank}.pt")
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """Every case fitted on 2 gloo processes; the results of each rank."""
    folder = tmp_path_factory.mktemp("sharded")
    mp.spawn(_rank_main, args=(str(folder / "init"), str(folder)), nprocs=WORLD, join=True)
    return [torch.load(folder / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def test_every_rank_ends_with_the_same_estimator(sharded):
    for case in CASES:
        a, b = sharded[0][case], sharded[1][case]
        for key in a:
            if isinstance(a[key], torch.Tensor):
                assert torch.equal(a[key], b[key]), (case, key)
            else:
                assert a[key] == b[key], (case, key)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{'sorted' if c[3] else 'mixed'}")
def test_sharded_solver_matches_the_single_process_one(sharded, case):
    kernel, solver, max_iter, sort_labels = case
    X, y, X_test = problem_data(sort_labels)
    single = fitted_summary(LpSVDD(kernel=kernel, solver=solver, max_iter=max_iter, **OPTIONS).fit(X, y), X_test)
    got = sharded[0][case]
    assert got["gamma"] == pytest.approx(single["gamma"], rel=1e-12)
    assert got["n_iter"] == single["n_iter"]
    for key in ("objective", "b_normal", "b_anomaly"):
        assert got[key] == pytest.approx(single[key], rel=1e-6), key
    # the same iterates, not only the same values: the runs stop short of the optimum
    assert single["gap"] > 1e-9 * abs(single["objective"])
    torch.testing.assert_close(got["alpha"], single["alpha"], rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(got["f_test"], single["f_test"], rtol=1e-6, atol=1e-9)


def test_a_sharded_fit_leaves_the_threshold_to_held_out_normals(sharded):
    """No cross-fitting across processes: the training rows' own scores are in-sample (issue 46), so
    there is no threshold until calibrate(X_cal); the single-process fit cross-fits."""
    for case in CASES:
        assert sharded[0][case]["threshold_rule"] == "none (fit_sharded does not cross-fit)"
    X, y, X_test = problem_data(False)
    model = LpSVDD(kernel="exact", solver="pairwise", **OPTIONS).fit(X, y)
    model._set_calibration(None, "fit_sharded does not cross-fit")  # the state fit_sharded leaves
    with pytest.raises(ValueError, match="no threshold: none \\(fit_sharded does not cross-fit\\).*calibrate"):
        model.predict(X_test)
    model.calibrate(X_test[:50])
    assert model.threshold_rule_ == "calibrate(X_cal): p-value <= 0.1" and model.predict(X_test).shape == (len(X_test),)


def test_shard_collectives(sharded):
    X, _, _ = problem_data(False)
    assert torch.equal(sharded[0]["gather"], X)
    assert torch.equal(sharded[1]["rows"], X[[300, 0, 151]])
    assert sharded[0]["median"] == ops.median_sq_distance(X, max_samples=120, seed=5)


def test_shard_bounds_partition_the_rows():
    for n, world in ((301, 2), (10, 3), (7, 7), (1000, 8)):
        bounds = [shard_bounds(n, world, r) for r in range(world)]
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        sizes = [stop - start for start, stop in bounds]
        assert max(sizes) - min(sizes) <= 1


def test_fit_sharded_refuses_what_it_cannot_do():
    X, y, _ = problem_data(False)
    with pytest.raises(ValueError, match="APG"):
        LpSVDD(solver="apg").fit_sharded(X, y)
    with pytest.raises(ValueError, match="rpcholesky"):
        LpSVDD(kernel="rpcholesky", solver="pairwise").fit_sharded(X, y)
    with pytest.raises(ValueError, match="kkt"):
        LpSVDD(solver="pairwise", recovery="paper").fit_sharded(X, y)
    with pytest.raises(ValueError, match="init_process_group"):
        LpSVDD(solver="pairwise").fit_sharded(X, y)
