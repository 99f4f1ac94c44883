"""Skillings-Mack rank test for a blocks x treatments table with missing entries.

The paper (Section "Evaluation metrics", captions of Tables II and V) compares
methods across data sets with the Skillings--Mack test [SM81], a Friedman-type
omnibus rank test that tolerates missing (unreported) entries, and reports the
average rank of every method over the entries it has.

[SM81] J. H. Skillings and G. A. Mack, "On the use of a Friedman-type statistic
in balanced and unbalanced block designs", Technometrics 23(2):171-177, 1981.

The statistic
-------------
Rows are blocks (data sets) i = 1..n, columns are treatments (methods)
j = 1..k, NaN marks a missing entry. Block i has k_i observed values, ranked
1..k_i within the block (average ranks for ties); a missing entry is given the
average rank (k_i + 1) / 2, i.e. it contributes nothing. The adjusted treatment
sums are

    A_j = sum_i sqrt(12 / (k_i + 1)) * (r_ij - (k_i + 1) / 2).

Under H0 (within each block every ordering of the observed values is equally
likely, no ties) a block contributes variance k_i - 1 to each of its observed
treatments and covariance -1 to each observed pair, so with
lambda_jt = number of blocks in which both j and t are observed,

    Sigma_jt = -lambda_jt  (j != t),     Sigma_jj = sum_{t != j} lambda_jt.

The statistic is SM = A^T Sigma^- A with a generalized inverse (numpy pinv);
it is asymptotically chi-square with k - 1 degrees of freedom. Sigma is the
Laplacian of the graph "treatments j, t observed together in some block", so
its rank is k - 1 exactly when that graph is connected; a disconnected design
is rejected, since k - 1 degrees of freedom would then be wrong.

With complete data and no ties, Sigma = n (k I - 1 1^T) and SM equals
Friedman's chi-square exactly (scipy.stats.friedmanchisquare). With ties, the
midranks enter A but Sigma stays the no-ties covariance of [SM81], so SM
equals the *uncorrected* Friedman statistic: scipy's tie-corrected value
divided by SM is 1 / (1 - sum(t^3 - t) / (n k (k^2 - 1))) >= 1, i.e. SM is
smaller (conservative) under ties, as noted by Chatfield and Mander (Stata
Journal 9(2), 2009).

Blocks with fewer than two observed values carry no information and are
dropped. The statistic does not depend on the rank direction (reversing ranks
negates A); ``higher_is_better`` only orients ``average_ranks`` (rank 1 = best).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2, rankdata

__all__ = ["SkillingsMackResult", "skillings_mack"]


@dataclass(frozen=True)
class SkillingsMackResult:
    """Outcome of :func:`skillings_mack`.

    ``average_ranks[j]`` is the mean within-block rank of treatment j over the
    used blocks where it is observed (rank 1 = best).
    """

    statistic: float
    df: int
    p_value: float
    average_ranks: np.ndarray
    n_blocks_used: int


def _is_connected(together: np.ndarray) -> bool:
    """Whether the graph with adjacency ``together > 0`` is connected."""
    k = together.shape[0]
    seen = {0}
    stack = [0]
    while stack:
        j = stack.pop()
        for t in np.flatnonzero(together[j] > 0):
            if t not in seen:
                seen.add(int(t))
                stack.append(int(t))
    return len(seen) == k


def skillings_mack(table, higher_is_better: bool = True) -> SkillingsMackResult:
    """The Skillings-Mack rank test of treatments over blocks with missing entries.

    Parameters
    ----------
    table : array-like
        Rows = blocks, columns = treatments, NaN = missing.
    higher_is_better : bool
        Rank 1 is the largest value (else the smallest).

    Returns
    -------
    SkillingsMackResult
        The statistic, df = k - 1, the chi-square upper-tail p-value, the
        per-treatment average ranks (rank 1 = best) and the number of blocks used.

    Raises
    ------
    ValueError
        For a table that is not 2-D, has fewer than 2 treatments,
    contains +-inf, has fewer than 2 blocks with at least 2 observed values, has
    a treatment not observed in any such block, or whose treatments do not form
    a connected design.
    """
    x = np.asarray(table, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"table must be 2-D (blocks x treatments), got {x.ndim}-D")
    k = x.shape[1]
    if k < 2:
        raise ValueError(f"need at least 2 treatments (columns), got {k}")
    if np.isinf(x).any():
        raise ValueError("table contains infinite values; only NaN may mark missing entries")

    usable = (~np.isnan(x)).sum(axis=1) >= 2
    x = x[usable]
    observed = ~np.isnan(x)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 blocks with >= 2 observed values, got {n}")
    never = np.flatnonzero(~observed.any(axis=0))
    if never.size:
        raise ValueError(f"treatment(s) {never.tolist()} never observed in a usable block")

    k_i = observed.sum(axis=1)
    # ranks within each block, rank 1 = best; missing entries get (k_i + 1) / 2
    centred = np.zeros_like(x)
    rank_sum = np.zeros(k)
    for i in range(n):
        vals = x[i, observed[i]]
        r = rankdata(-vals if higher_is_better else vals)
        rank_sum[observed[i]] += r
        centred[i, observed[i]] = r - (k_i[i] + 1) / 2.0
    average_ranks = rank_sum / observed.sum(axis=0)

    A = (np.sqrt(12.0 / (k_i + 1.0))[:, None] * centred).sum(axis=0)
    obs = observed.astype(float)
    together = obs.T @ obs  # lambda_jt (diagonal: number of blocks with j)
    np.fill_diagonal(together, 0.0)
    if not _is_connected(together):
        raise ValueError("treatments do not form a connected design; the statistic would not have k - 1 df")
    sigma = np.diag(together.sum(axis=1)) - together

    statistic = max(float(A @ np.linalg.pinv(sigma) @ A), 0.0)
    df = k - 1
    return SkillingsMackResult(
        statistic=statistic,
        df=df,
        p_value=float(chi2.sf(statistic, df)),
        average_ranks=average_ranks,
        n_blocks_used=int(n),
    )
