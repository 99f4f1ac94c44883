"""Skillings-Mack test (dlmsvdd.experiments.stats) against independent references: scipy's
Friedman test, Durbin's statistic, a plain-loop implementation of the
Skillings-Mack (1981) formulas, and the published Skillings-Mack example."""

import math

import numpy as np
import pytest
from scipy.stats import chi2, friedmanchisquare

from dlmsvdd.experiments.stats import SkillingsMackResult, skillings_mack

nan = np.nan


# ---------------------------------------------------------------- references


def _midranks(values):
    """Average ranks (1 = smallest) by counting, without scipy."""
    out = []
    for v in values:
        less = sum(1 for w in values if w < v)
        equal = sum(1 for w in values if w == v)
        out.append(1 + less + (equal - 1) / 2)
    return out


def _loop_skillings_mack(table):
    """Skillings & Mack (1981) written out element by element.

    A_j = sum_i sqrt(12/(k_i+1)) (r_ij - (k_i+1)/2), missing -> 0;
    Sigma_jt = -lambda_jt, Sigma_jj = sum_{t != j} lambda_jt.
    The generalized inverse is replaced by the reduced system: A sums to 0 and,
    for a connected design, Sigma without its last row/column is invertible, so
    A^T Sigma^- A = A_{1..k-1}^T Sigma_11^{-1} A_{1..k-1}.
    """
    rows = [list(r) for r in table]
    k = len(rows[0])
    A = [0.0] * k
    lam = [[0] * k for _ in range(k)]
    for row in rows:
        present = [j for j in range(k) if not math.isnan(row[j])]
        ki = len(present)
        if ki < 2:
            continue
        ranks = _midranks([row[j] for j in present])
        for j, r in zip(present, ranks):
            A[j] += math.sqrt(12.0 / (ki + 1)) * (r - (ki + 1) / 2.0)
        for j in present:
            for t in present:
                if j != t:
                    lam[j][t] += 1
    sigma = [[0.0] * k for _ in range(k)]
    for j in range(k):
        for t in range(k):
            sigma[j][t] = float(sum(lam[j][s] for s in range(k) if s != j)) if j == t else -float(lam[j][t])
    a1 = np.array(A[:-1])
    s11 = np.array([r[:-1] for r in sigma[:-1]])
    return float(a1 @ np.linalg.solve(s11, a1)), A


def _tie_correction(table):
    """scipy's Friedman tie factor 1 - sum(t^3 - t) / (n k (k^2 - 1))."""
    n, k = table.shape
    ties = 0.0
    for row in table:
        _, counts = np.unique(row, return_counts=True)
        ties += float(np.sum(counts**3 - counts))
    return 1.0 - ties / (n * k * (k * k - 1))


# ---------------------------------------------------- 1. complete data: Friedman


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", [(12, 4), (7, 6), (30, 3)])
def test_complete_no_ties_equals_friedman(seed, shape):
    table = np.random.default_rng(seed).normal(size=shape)
    res = skillings_mack(table)
    ref = friedmanchisquare(*table.T)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-10, abs=1e-10)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-10, abs=1e-12)
    assert res.df == shape[1] - 1
    assert res.n_blocks_used == shape[0]


@pytest.mark.parametrize("seed", range(5))
def test_complete_with_ties_equals_uncorrected_friedman(seed):
    # Sigma is the no-ties covariance, so SM = uncorrected Friedman
    # = scipy's tie-corrected statistic * (1 - sum(t^3 - t) / (n k (k^2 - 1))) < scipy's.
    table = np.random.default_rng(seed).integers(0, 3, size=(12, 4)).astype(float)
    c = _tie_correction(table)
    assert c < 1.0  # there are ties
    res = skillings_mack(table)
    ref = friedmanchisquare(*table.T).statistic
    assert res.statistic == pytest.approx(ref * c, rel=1e-10, abs=1e-10)
    assert res.statistic < ref


def test_balanced_incomplete_block_design_equals_durbin():
    # Fano plane: t = 7 treatments, blocks of size 3, r = 3 replicates, lambda = 1.
    # Durbin (1951): D = 12 (t-1) / (r t (k^2-1)) * sum_j (R_j - r (k+1)/2)^2.
    blocks = [(0, 1, 2), (0, 3, 4), (0, 5, 6), (1, 3, 5), (1, 4, 6), (2, 3, 6), (2, 4, 5)]
    rng = np.random.default_rng(3)
    table = np.full((7, 7), nan)
    for i, b in enumerate(blocks):
        table[i, list(b)] = rng.normal(size=3) + np.array(b) * 0.3
    t, kb, r = 7, 3, 3
    R = np.zeros(t)
    for row in table:
        present = np.flatnonzero(~np.isnan(row))
        R[present] += _midranks(list(row[present]))
    durbin = 12 * (t - 1) / (r * t * (kb * kb - 1)) * np.sum((R - r * (kb + 1) / 2) ** 2)
    assert skillings_mack(table).statistic == pytest.approx(durbin, rel=1e-10)


# --------------------------------------------- 2. missing entries: loop reference


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [False, True])
def test_missing_entries_match_loop_reference(seed, ties):
    rng = np.random.default_rng(100 + seed)
    table = rng.integers(0, 4, size=(15, 5)).astype(float) if ties else rng.normal(size=(15, 5))
    table[rng.random(table.shape) < 0.3] = nan
    ref, _ = _loop_skillings_mack(table)
    res = skillings_mack(table)
    assert res.statistic == pytest.approx(ref, rel=1e-10, abs=1e-10)
    assert res.p_value == pytest.approx(chi2.sf(ref, 4), rel=1e-9, abs=1e-14)
    assert res.n_blocks_used == int(np.sum((~np.isnan(table)).sum(axis=1) >= 2))


def test_published_example_skillings_mack_1981_table1():
    # Skillings & Mack (1981), Table 1 p. 173: four methods of assembling a product
    # (treatments A-D) in nine blocks, four entries missing. Data as in the example
    # of the CRAN package Skillings.Mack (man/Ski.Mack.Rd); its printed output,
    # "Skillings-Mack Statistic = 15.493049, p-value = 0.001440 ... d.f. = 3",
    # is shown in the README of github.com/ZacWarham/Skillings.Mack (a fork of it).
    table = [
        [3.2, 4.1, 3.8, 4.2],
        [3.1, 3.9, 3.4, 4.0],
        [4.3, 3.5, 4.6, 4.8],
        [3.5, 3.6, 3.9, 4.0],
        [3.6, 4.2, 3.7, 3.9],
        [4.5, 4.7, 3.7, nan],
        [nan, 4.2, 3.4, nan],
        [4.3, 4.6, 4.4, 4.9],
        [3.5, nan, 3.7, 3.9],
    ]
    res = skillings_mack(table)
    assert res.statistic == pytest.approx(15.493049, abs=5e-7)
    assert res.p_value == pytest.approx(0.001440, abs=5e-7)
    assert res.df == 3
    assert res.statistic == pytest.approx(_loop_skillings_mack(table)[0], rel=1e-10)


# ------------------------------------------------------------ 3. average ranks


HAND = [
    [0.9, 0.8, nan],
    [0.7, 0.7, 0.6],
    [nan, 0.5, 0.9],
]


def test_average_ranks_higher_is_better():
    # block 1: t0=1, t1=2; block 2: t0=t1=1.5, t2=3; block 3: t2=1, t1=2
    res = skillings_mack(HAND)
    np.testing.assert_allclose(res.average_ranks, [(1 + 1.5) / 2, (2 + 1.5 + 2) / 3, (3 + 1) / 2], rtol=1e-14)
    assert isinstance(res, SkillingsMackResult)
    assert res.n_blocks_used == 3 and res.df == 2


def test_average_ranks_lower_is_better_and_statistic_invariant():
    # block 1: t0=2, t1=1; block 2: t2=1, t0=t1=2.5; block 3: t1=1, t2=2
    low = skillings_mack(HAND, higher_is_better=False)
    np.testing.assert_allclose(low.average_ranks, [(2 + 2.5) / 2, (1 + 2.5 + 1) / 3, (1 + 2) / 2], rtol=1e-14)
    high = skillings_mack(HAND)
    assert low.statistic == pytest.approx(high.statistic, rel=1e-12)
    assert low.p_value == pytest.approx(high.p_value, rel=1e-12)


# --------------------------------------------------- 4. dropped blocks, errors


def test_blocks_with_fewer_than_two_values_are_dropped():
    table = np.random.default_rng(7).normal(size=(10, 4))
    table[[1, 4], [0, 2]] = nan
    base = skillings_mack(table)
    padded = np.vstack([table, [nan, 5.0, nan, nan], [nan, nan, nan, nan], [-3.0, nan, nan, nan]])
    res = skillings_mack(padded)
    assert res.statistic == pytest.approx(base.statistic, rel=1e-13)
    assert res.p_value == pytest.approx(base.p_value, rel=1e-13)
    np.testing.assert_allclose(res.average_ranks, base.average_ranks, rtol=1e-14)
    assert res.n_blocks_used == base.n_blocks_used == 10


@pytest.mark.parametrize(
    "table, match",
    [
        ([1.0, 2.0, 3.0], "2-D"),
        (np.zeros((2, 2, 2)), "2-D"),
        ([[1.0], [2.0], [3.0]], "2 treatments"),
        ([[1.0, 2.0, 3.0], [1.0, nan, nan]], "2 blocks"),
        ([[1.0, 2.0, nan], [2.0, 1.0, nan], [3.0, 1.0, nan]], r"treatment\(s\) \[2\] never observed"),
        # treatment 2 only appears in a one-value block, which is dropped
        ([[1.0, 2.0, nan], [2.0, 1.0, nan], [nan, nan, 4.0]], r"treatment\(s\) \[2\] never observed"),
        ([[1.0, 2.0, 3.0], [1.0, np.inf, 2.0]], "infinite"),
        ([[1.0, 2.0, 3.0], [-np.inf, 1.0, 2.0]], "infinite"),
        # {0, 1} and {2, 3} are never observed together
        ([[1.0, 2.0, nan, nan], [2.0, 1.0, nan, nan], [nan, nan, 1.0, 2.0], [nan, nan, 3.0, 2.0]], "connected"),
    ],
)
def test_bad_inputs_raise(table, match):
    with pytest.raises(ValueError, match=match):
        skillings_mack(table)
