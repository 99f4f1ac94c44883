"""The dual's CUDA kernels (oracle pass, Frank-Wolfe updates, device column
sources), run on the CPU through the emulation layer, against the CPU routines.

The emulation launches at most 2 blocks of 256 threads, so n up to ~3 blocks
covers one and several blocks, the grid-stride loops and the second reduction.
"""

import numpy as np
import pytest
import torch

from dlmsvdd_ext import _C, ops
from dlmsvdd_ext.dual import DualProblem

BLOCK = 256  # threads of the dual kernels' blocks


def coefs_for(p, nu, anomalies):
    t = torch.tensor([1.0, 1.0, -1.0] if anomalies else [1.0, 1.0], dtype=torch.float64)
    return DualProblem.from_labels(t, p=p, nu=nu if anomalies else 1.0, c1=0.1, c2=0.2).coefs()


def random_state(seed, n, dtype, anomalies, zero_fraction=0.3):
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.0, 1.0, n)
    alpha[rng.uniform(size=n) < zero_fraction] = 0.0
    Ka = rng.standard_normal(n)
    t = np.ones(n)
    if anomalies:
        t[rng.uniform(size=n) < 0.3] = -1.0
    return tuple(torch.from_numpy(a).to(dtype) for a in (alpha, Ka, t))


INDICES = ["fw_normal", "fw_anomaly", "away_normal", "away_anomaly"]
GRADIENTS = ["g_fw_normal", "g_fw_anomaly", "g_away_normal", "g_away_anomaly"]
SUMS = ["alpha_dot_g", "quadratic", "penalty", "objective", "gap"]


def assert_oracles_match(alpha, Ka, t, coefs):
    # shard=True: random labels may leave a class empty whatever the coefficients;
    # the checks of a whole problem's labels are tested at the end.
    cpu = ops.dual_oracle(alpha, Ka, t, coefs, shard=True)
    emu = ops.dual_oracle(alpha, Ka, t, coefs, cuda_emulation=True, shard=True)
    # Same per-element arithmetic (dual_math.h, same compiler): the atoms and
    # their gradients are identical, ties included.
    for key in INDICES + GRADIENTS:
        assert emu[key] == cpu[key], (key, emu[key], cpu[key])
    # The double sums only differ in their order.
    scale = float((alpha.double() * Ka.double()).abs().sum() + abs(cpu["alpha_dot_g"]) + cpu["penalty"]) + 1e-300
    for key in SUMS:
        assert abs(emu[key] - cpu[key]) <= 1e-13 * scale, (key, emu[key], cpu[key])
    return cpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 2, 37, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 1, 3 * BLOCK - 5])
@pytest.mark.parametrize("anomalies", [False, True])
def test_oracle_random_states(n, dtype, anomalies):
    alpha, Ka, t = random_state(n, n, dtype, anomalies)
    assert_oracles_match(alpha, Ka, t, coefs_for(2.0, 1.4, anomalies))


@pytest.mark.parametrize("p", [1.2, 5.0])  # q = 6 and q = 1.25: the pow branch of the penalty
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_oracle_other_exponents(p, dtype):
    alpha, Ka, t = random_state(3, 2 * BLOCK + 40, dtype, True)
    assert_oracles_match(alpha, Ka, t, coefs_for(p, 2.0, True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [BLOCK + 3, 3 * BLOCK - 1])
def test_oracle_ties_go_to_the_lowest_index(n, dtype):
    # Few distinct values, all exact in binary: many equal gradients in every
    # block and across blocks.
    rng = np.random.default_rng(n)
    alpha = torch.from_numpy(rng.integers(0, 3, n) * 0.25).to(dtype)
    Ka = torch.from_numpy(rng.integers(-2, 3, n) * 0.5).to(dtype)
    t = torch.from_numpy(np.where(rng.uniform(size=n) < 0.4, -1.0, 1.0)).to(dtype)
    coefs = {"q": 2.0, "pen_normal": 0.5, "pen_anomaly": 0.25, "mu_normal": 1.5, "mu_anomaly": 0.5}
    cpu = assert_oracles_match(alpha, Ka, t, coefs)
    g = (2 * t * Ka + 2 * torch.where(t > 0, 0.5, 0.25) * alpha).double().numpy()
    normal = t.numpy() > 0
    assert cpu["fw_normal"] == int(np.flatnonzero(normal & (g == g[normal].min()))[0])
    support = normal & (alpha.numpy() > 0)
    assert cpu["away_normal"] == int(np.flatnonzero(support & (g == g[support].max()))[0])


# The emulated grid has 2 blocks of 256 threads (stride 512): index 600 belongs
# to block 0 and index 300 to block 1, so the merge must order equal gradients
# by index, not by block; 40 and 552 are both thread 40's, which must keep the first.
@pytest.mark.parametrize("smallest,largest", [((300, 600), (310, 605)), ((41, 553), (40, 552))])
def test_oracle_ties_across_blocks_and_within_a_thread(smallest, largest):
    n = 3 * BLOCK - 10
    alpha = torch.full((n,), 0.5, dtype=torch.float64)
    Ka = torch.ones(n, dtype=torch.float64)
    t = torch.ones(n, dtype=torch.float64)
    Ka[list(smallest)] = -1.0  # two equal smallest gradients
    Ka[list(largest)] = 3.0  # two equal largest
    coefs = {"q": 2.0, "pen_normal": 0.5, "pen_anomaly": 0.5, "mu_normal": 1.0, "mu_anomaly": 0.0}
    r = assert_oracles_match(alpha, Ka, t, coefs)
    assert (r["fw_normal"], r["away_normal"]) == (smallest[0], largest[0])
    assert r["fw_anomaly"] == r["away_anomaly"] == -1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_oracle_empty_supports(dtype):
    n = 2 * BLOCK + 17
    alpha, Ka, t = random_state(5, n, dtype, True)
    coefs = coefs_for(2.0, 1.4, True)
    alpha[t < 0] = 0.0  # no anomalous support
    r = assert_oracles_match(alpha, Ka, t, coefs)
    assert r["away_anomaly"] == -1 and r["away_normal"] >= 0
    alpha.zero_()  # no support at all
    r = assert_oracles_match(alpha, Ka, t, coefs)
    assert r["away_normal"] == r["away_anomaly"] == -1 and r["penalty"] == 0.0


# ---- Frank-Wolfe


def separated_problem(seed, n, d=4):
    """Points around well-separated centres, a third anomalous: continuous data,
    so no two gradients tie and both runs pick the same atoms."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d)) * 3
    X = centres[rng.integers(0, 4, n)] + rng.standard_normal((n, d))
    t = np.ones(n)
    t[rng.permutation(n)[: n // 3]] = -1
    gamma = 1.0 / np.median(((X[:, None] - X[None]) ** 2).sum(-1))
    return torch.from_numpy(X), torch.from_numpy(t), float(gamma)


@pytest.fixture(scope="module")
def fw_problem():
    n = 2 * BLOCK + 90  # past the emulated grid: the update kernels stride
    X, t, gamma = separated_problem(0, n)
    K = ops.rbf_gram(X, None, gamma)
    w, U = torch.linalg.eigh(K)
    Z = (U[:, -24:] * w[-24:].sqrt()).contiguous()  # a rank-24 factor
    return X, t, gamma, K, Z


def run_fw(source, matrix, K, t, gamma, dtype, method, cuda_emulation, max_iter, tol=0.0, cache_slots=3):
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    alpha, t_run = prob.uniform_alpha().to(dtype), prob.t.to(dtype)  # the compiled loop in dtype itself
    Ka = K.to(dtype) @ (alpha * t_run)
    info = ops.fw_solve(alpha, Ka, t_run, prob.coefs(), method=method, max_iter=max_iter, tol=tol,
                        source=source, matrix=matrix.to(dtype), gamma=gamma, cache_slots=cache_slots,
                        cuda_emulation=cuda_emulation)
    return alpha, Ka, info


TOL_FW = {torch.float32: 2e-5, torch.float64: 1e-10}


def assert_runs_match(cpu, emu, dtype):
    (a0, k0, i0), (a1, k1, i1) = cpu, emu
    rel = TOL_FW[dtype]
    assert i1["n_iter"] == i0["n_iter"] and i1["converged"] == i0["converged"]
    assert i1.get("cache_hits") == i0.get("cache_hits") and i1.get("cache_misses") == i0.get("cache_misses")
    assert float((a1 - a0).abs().max()) <= rel * float(a0.abs().max())
    assert float((k1 - k0).abs().max()) <= rel * float(k0.abs().max())
    obj0, obj1 = i0["history_objective"], i1["history_objective"]
    assert obj1.dtype == torch.float64 and obj1.device.type == "cpu"
    assert float((obj1 - obj0).abs().max()) <= rel * float(obj0.abs().max())
    assert float((i1["history_gap"] - i0["history_gap"]).abs().max()) <= rel * float(obj0.abs().max())


@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
@pytest.mark.parametrize("source", ["dense", "features", "factor"])
def test_fw_solve_matches_cpu(fw_problem, source, method):
    X, t, gamma, K, Z = fw_problem
    matrix = {"dense": K, "features": X, "factor": Z}[source]
    K_used = Z @ Z.T if source == "factor" else K
    runs = [run_fw(source, matrix, K_used, t, gamma, torch.float64, method, emu, max_iter=12) for emu in (False, True)]
    assert_runs_match(*runs, torch.float64)
    assert runs[1][2]["n_iter"] == 12
    hist = runs[1][2]["history_objective"]
    assert hist[-1] < hist[1]  # it descends


@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
def test_fw_solve_float32(fw_problem, method):
    X, t, gamma, K, Z = fw_problem
    runs = [run_fw("features", X, K, t, gamma, torch.float32, method, emu, max_iter=8) for emu in (False, True)]
    assert_runs_match(*runs, torch.float32)


def test_fw_solve_converges_with_cache_hits():
    """Pairwise on a small problem until the gap certifies: the same stopping
    iteration, and an LRU cache that both hits and evicts alike."""
    X, t, gamma = separated_problem(1, 40)
    K = ops.rbf_gram(X, None, gamma)
    runs = [run_fw("features", X, K, t, gamma, torch.float64, "pairwise", emu, max_iter=300, tol=1e-3, cache_slots=16)
            for emu in (False, True)]
    assert_runs_match(*runs, torch.float64)
    info = runs[1][2]
    assert info["converged"] and 0 < info["n_iter"] < 300
    assert info["cache_hits"] > 0 and info["cache_misses"] > 16


# ---- a float64 state over float32 columns


@pytest.mark.parametrize("cuda_emulation", [False, True])
@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
def test_float64_state_over_float32_k_is_the_widened_run(fw_problem, method, cuda_emulation):
    """Over a float32 K the float64 state reads each entry widened: the very
    run over K32 converted to float64 (a copy the loop no longer needs)."""
    X, t, gamma, K, Z = fw_problem
    K32 = K.float()
    runs = []
    for matrix in (K32, K32.double()):
        prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
        alpha = prob.uniform_alpha()
        Ka = K32.double() @ (alpha * prob.t)
        info = ops.fw_solve(alpha, Ka, prob.t, prob.coefs(), method=method, max_iter=40, tol=0.0, source="dense",
                            matrix=matrix, cuda_emulation=cuda_emulation)
        runs.append((alpha, Ka, info))
    (a0, k0, i0), (a1, k1, i1) = runs
    assert a0.dtype == k0.dtype == torch.float64
    assert i0["n_iter"] == i1["n_iter"] == 40
    assert torch.equal(a0, a1) and torch.equal(k0, k1)
    assert torch.equal(i0["history_objective"], i1["history_objective"])
    assert torch.equal(i0["history_gap"], i1["history_gap"])


@pytest.mark.parametrize("source", ["features", "factor"])
def test_float64_state_over_float32_columns_certifies_below_float32(source):
    """float32 features (or factor) with a float64 state: pairwise reaches a
    relative gap of 1e-10, far below float32's rounding (1e-7), at the
    optimum of the float64 problem up to the float32 columns' error."""
    X, t, gamma = separated_problem(2, 120)
    K = ops.rbf_gram(X, None, gamma)
    w, U = torch.linalg.eigh(K)
    Z = (U[:, -30:] * w[-30:].sqrt()).contiguous()
    matrix64 = X if source == "features" else Z
    K_used = K if source == "features" else Z @ Z.T
    runs = {}
    for dtype, tol in ((torch.float32, 1e-10), (torch.float64, 1e-12)):  # float32 columns; the float64 problem
        prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
        alpha = prob.uniform_alpha()
        Ka = K_used @ (alpha * prob.t)
        info = ops.fw_solve(alpha, Ka, prob.t, prob.coefs(), method="pairwise", max_iter=3000, tol=tol,
                            source=source, matrix=matrix64.to(dtype), gamma=gamma, cache_slots=16)
        assert info["converged"] and info["stop"] == "converged", info["stop"]
        assert alpha.dtype == Ka.dtype == torch.float64
        obj, gap = float(info["history_objective"][-1]), float(info["history_gap"][-1])
        assert 0 <= gap <= tol * obj
        runs[dtype] = (alpha, obj)
    (a32, obj32), (a64, obj64) = runs[torch.float32], runs[torch.float64]
    assert abs(obj32 - obj64) <= 1e-5 * obj64  # float32 columns: K off by ~1e-7
    assert float((a32 - a64).abs().max()) <= 1e-3 * float(a64.abs().max())


@pytest.mark.parametrize("method", ["vanilla", "pairwise"])
@pytest.mark.parametrize("source", ["features", "factor"])
def test_float64_state_over_float32_columns_emulated_matches_cpu(fw_problem, source, method):
    X, t, gamma, K, Z = fw_problem
    matrix = (X if source == "features" else Z).float()
    K_used = K if source == "features" else Z @ Z.T
    runs = []
    for cuda_emulation in (False, True):
        prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
        alpha = prob.uniform_alpha()
        Ka = K_used @ (alpha * prob.t)
        info = ops.fw_solve(alpha, Ka, prob.t, prob.coefs(), method=method, max_iter=10, tol=0.0, source=source,
                            matrix=matrix, gamma=gamma, cache_slots=3, cuda_emulation=cuda_emulation)
        assert alpha.dtype == torch.float64
        runs.append((alpha, Ka, info))
    assert_runs_match(*runs, torch.float32)  # the columns differ by float32 rounding


def test_column_dtype_pairs():
    X, t, gamma = separated_problem(3, 20)
    K = ops.rbf_gram(X, None, gamma)
    prob = DualProblem.from_labels(t, p=2.0, nu=1.2)
    args = dict(method="pairwise", max_iter=3, tol=0.0, source="dense")
    alpha32 = prob.uniform_alpha().float()
    with pytest.raises(TypeError, match="K: dtype float64 with a float32 state"):
        ops.fw_solve(alpha32, (K.float() @ (alpha32 * prob.t.float())), prob.t.float(), prob.coefs(), matrix=K, **args)
    alpha = prob.uniform_alpha()
    hist = torch.empty(4, dtype=torch.float64)
    cache = torch.empty(2, 20, dtype=torch.float64)  # the cache takes the columns' dtype
    with pytest.raises(TypeError, match="cache: dtype float64 does not match X"):
        _C.fw_solve(alpha, K @ (alpha * prob.t), prob.t, prob.coefs(), "pairwise", 3, 0.0, 0, hist, hist.clone(),
                    "features", X.float(), gamma, cache)


# ---- arguments


def test_workspace_is_checked():
    alpha, Ka, t = random_state(0, 300, torch.float64, True)
    coefs = coefs_for(2.0, 1.4, True)
    need = _C.dual_oracle_workspace_bytes(300)
    assert need >= 3 * 72 and _C.dual_oracle_workspace_bytes(0) > 0
    with pytest.raises(ValueError, match="workspace: the CUDA and emulated kernels need"):
        _C.dual_oracle(alpha, Ka, t, coefs, None, True)
    with pytest.raises(ValueError, match=f"at least {need} bytes"):
        _C.dual_oracle(alpha, Ka, t, coefs, torch.empty(need // 8 - 1, dtype=torch.float64), True)
    with pytest.raises(ValueError, match="contiguous float64"):
        _C.dual_oracle(alpha, Ka, t, coefs, torch.empty(need, dtype=torch.float32), True)
    ws = torch.empty(need // 8, dtype=torch.float64)
    assert _C.dual_oracle(alpha, Ka, t, coefs, ws, True)["fw_normal"] == ops.dual_oracle(alpha, Ka, t, coefs)["fw_normal"]
    with pytest.raises(ValueError, match="n must be >= 0"):
        _C.dual_oracle_workspace_bytes(-1)
