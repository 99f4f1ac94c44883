"""The alpha-step across processes (torch.distributed) without gathering the kernel.

Rank r holds a contiguous shard of the training set, rows [start_r, stop_r):
its features X_r (exact kernel) or its rows Z_r of the factor (approximations),
its labels, and its slices of alpha and of K a. A Frank-Wolfe iteration then
needs collectives on O(1) and O(w) data only, w = d (exact) or m (factor):

* the linear oracle: each rank's best atoms (global index and gradient) and
  three partial sums, an all_gather of 11 float64 per rank, merged the same
  way on every rank (ties to the lower index, like the compiled merge);
* the new atoms' rows (features or factor rows) and weights: one all_reduce of
  2 (w + 1) values, zero except at the rows' owners;
* each rank computes its slice of the atoms' kernel columns itself and updates
  its slice of K a.

K a of the starting alpha is needed once per solve: ``Z_r (sum_s Z_s^T a_s)``,
an all_reduce of m values, for a factor; for the exact kernel every rank's
(X_s, a_s) is broadcast in turn (O(N d) once per solve; the kernel itself
never travels). Every rank ends with the same objective, gap and boundary,
equal to the single-process Frank-Wolfe solver's up to rounding.

Works with any torch.distributed backend that has all_reduce, all_gather and
broadcast (gloo on CPU, nccl on GPUs); tensors live on the features' device.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from . import ops
from .dual import DualProblem
from .solver import SolveResult, StoppingRule, kkt_boundary

METHODS = ("pairwise", "paper")  # APG needs whole kernel products every iteration


def shard_bounds(n: int, world_size: int, rank: int) -> tuple[int, int]:
    """Rows [start, stop) of rank's part of n rows split into near-equal contiguous parts."""
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


class Shard:
    """This process's rows of an n-row training set, and the collectives on it
    (over the default process group)."""

    def __init__(self, n: int):
        if not dist.is_initialized():
            raise ValueError("torch.distributed is not initialised: call torch.distributed.init_process_group first")
        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        if n < self.world_size:
            raise ValueError(f"{n} samples cannot be split over {self.world_size} processes")
        self.n = n
        self.bounds = [shard_bounds(n, self.world_size, r) for r in range(self.world_size)]
        self.start, self.stop = self.bounds[self.rank]

    @property
    def size(self) -> int:
        return self.stop - self.start

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        """The sum over ranks (a new tensor)."""
        out = x.clone()
        dist.all_reduce(out)
        return out

    def rows(self, local: torch.Tensor, indices, extra: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``indices`` (global) of the set whose shard is ``local`` (with this
        shard's ``extra`` values as a last column), on every rank: their owners
        fill them in, the others contribute zeros."""
        def row(j):  # this shard's row j (no copy of the whole shard)
            return local[j] if extra is None else torch.cat([local[j], extra[j:j + 1].to(local.dtype)])

        indices = [int(i) for i in indices]
        out = local.new_zeros((len(indices),) + tuple(row(0).shape))
        for k, i in enumerate(indices):
            if self.start <= i < self.stop:
                out[k] = row(i - self.start)
        dist.all_reduce(out)
        return out

    def gather(self, local: torch.Tensor) -> torch.Tensor:
        """The whole set from its shards, in row order, on every rank."""
        if local.shape[0] != self.size:
            raise ValueError(f"this rank's shard has {self.size} rows, got {local.shape[0]}")
        longest = max(stop - start for start, stop in self.bounds)
        padded = local.new_zeros((longest,) + tuple(local.shape[1:]))
        padded[: self.size] = local
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded.contiguous())
        return torch.cat([part[: stop - start] for part, (start, stop) in zip(parts, self.bounds)])


def median_sq_distance(X_local: torch.Tensor, shard: Shard, max_samples: int = 2000, seed=0) -> float:
    """``ops.median_sq_distance`` of the whole set: the same seeded rows, gathered (O(max_samples d))."""
    rows = ops.median_rows(shard.n, max_samples, seed)
    return ops.median_sq_distance(shard.rows(X_local, rows), max_samples=len(rows))


class ShardedKernel:
    """K restricted to this rank's rows, through the rows that define it (X_r or
    Z_r), held in float64: products, columns and the solver state are float64
    whatever the features' dtype (``dlmsvdd_ext.kernel_operator``)."""

    def __init__(self, shard: Shard, rows: torch.Tensor):
        if rows.shape[0] != shard.size:
            raise ValueError(f"this rank's shard has {shard.size} rows, got {rows.shape[0]}")
        self.shard, self.local = shard, rows.to(torch.float64).contiguous()
        self.n_matvec = 0

    def atoms(self, indices, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The atoms' defining rows and their weights, on every rank (one all_reduce)."""
        packed = self.shard.rows(self.local, indices, extra=alpha)
        return packed[:, :-1].contiguous(), packed[:, -1]

    def matvec(self, a: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def columns(self, atom_rows: torch.Tensor) -> torch.Tensor:
        """This rank's slice of the atoms' kernel columns (n_r x k)."""
        raise NotImplementedError

    def gram(self, atom_rows: torch.Tensor) -> torch.Tensor:
        """K among the atoms (k x k)."""
        raise NotImplementedError


class ShardedExact(ShardedKernel):
    """The exact RBF kernel of the features X, sharded by rows."""

    def __init__(self, shard: Shard, X_local: torch.Tensor, gamma: float):
        super().__init__(shard, X_local)
        self.gamma = float(gamma)

    def matvec(self, a):
        """(K a)_r = sum_s K(X_r, X_s) a_s, each rank's (X_s, a_s) broadcast in turn."""
        self.n_matvec += 1
        out = torch.zeros_like(a)
        for source, (start, stop) in enumerate(self.shard.bounds):
            if source == self.shard.rank:
                X_s, a_s = self.local, a.contiguous()
            else:
                X_s = self.local.new_empty((stop - start, self.local.shape[1]))
                a_s = a.new_empty(stop - start)
            dist.broadcast(X_s, source)
            dist.broadcast(a_s, source)
            out += ops.rbf_matvec(self.local, X_s, a_s, self.gamma)
        return out

    def columns(self, atom_rows):
        return ops.rbf_gram(self.local, atom_rows, self.gamma)

    def gram(self, atom_rows):
        return ops.rbf_gram(atom_rows, atom_rows, self.gamma)


class ShardedFactor(ShardedKernel):
    """K ~ Z Z^T with this rank's rows Z_r of the factor."""

    def matvec(self, a):
        """(K a)_r = Z_r (Z^T a): one all_reduce of m values."""
        self.n_matvec += 1
        return self.local @ self.shard.sum(self.local.T @ a)

    def columns(self, atom_rows):
        return self.local @ atom_rows.T

    def gram(self, atom_rows):
        return atom_rows @ atom_rows.T


_FW, _AWAY = ("fw_normal", "fw_anomaly"), ("away_normal", "away_anomaly")
_SUMS = ("alpha_dot_g", "quadratic", "penalty")


def oracle(op: ShardedKernel, alpha: torch.Tensor, Ka: torch.Tensor, problem: DualProblem) -> dict:
    """``ops.dual_oracle`` of the whole problem from the shards: the same keys,
    atoms as global indices, identical on every rank."""
    coefs = problem.coefs()
    local = ops.dual_oracle(alpha, Ka, problem.t, coefs, shard=True)
    record = []
    for key in _FW + _AWAY:
        i = local[key]
        record += [local["g_" + key], float(i + op.shard.start) if i >= 0 else -1.0]
    record += [local[key] for key in _SUMS]
    mine = torch.tensor(record, dtype=torch.float64, device=alpha.device)
    parts = [torch.empty_like(mine) for _ in range(op.shard.world_size)]
    dist.all_gather(parts, mine)
    table = torch.stack(parts).cpu().tolist()

    merged = {}
    for k, key in enumerate(_FW + _AWAY):
        sign = 1.0 if key in _FW else -1.0  # smallest gradient for the oracle, largest for the away atom
        seen = [(sign * row[2 * k], row[2 * k + 1]) for row in table if row[2 * k + 1] >= 0]
        best = min(seen) if seen else (0.0, -1.0)  # (gradient, index): ties go to the lower index
        merged[key], merged["g_" + key] = int(best[1]), sign * best[0]
    for k, key in enumerate(_SUMS):
        merged[key] = sum(row[8 + k] for row in table)  # in rank order: the same sum everywhere
    merged["objective"] = merged["quadratic"] + merged["penalty"]
    gap = merged["alpha_dot_g"] - coefs["mu_normal"] * merged["g_fw_normal"]
    if merged["fw_anomaly"] >= 0:
        gap -= coefs["mu_anomaly"] * merged["g_fw_anomaly"]
    merged["gap"] = gap
    return merged


def solve(op: ShardedKernel, problem: DualProblem, method: str = "pairwise", max_iter: int = 1000,
          tol: float = 1e-6, alpha0: torch.Tensor | None = None, step_offset: int = 0) -> tuple[SolveResult, dict]:
    """Frank-Wolfe on the shards, step for step the compiled loop (``ops.fw_solve``):
    ``"pairwise"`` (exact line search) or ``"paper"`` (vanilla, step 2/(tau+2)).
    ``problem`` holds this rank's labels and the whole set's class sizes;
    ``alpha0`` this rank's slice (default: uniform within each class).
    Returns this rank's slices in the result, and the last oracle pass (for
    ``solver.kkt_boundary``)."""
    if method not in METHODS:
        raise ValueError(f"the sharded solver runs {METHODS}, got {method!r}")
    if int(max_iter) < 0 or not (tol >= 0):
        raise ValueError(f"max_iter must be >= 0 and tol >= 0, got {max_iter}, {tol}")
    start = time.perf_counter()
    t, coefs, shard = problem.t, problem.coefs(), op.shard
    alpha = problem.uniform_alpha() if alpha0 is None else alpha0.to(torch.float64).clone()
    Ka = op.matvec(alpha * t)

    def add_local(i: int, value: float):
        if shard.start <= i < shard.stop:
            alpha[i - shard.start] += value

    rule = StoppingRule(max_iter, tol, StoppingRule.frank_wolfe_window(shard.n))
    while not rule.done(r := oracle(op, alpha, Ka, problem)):
        if method == "paper":  # alpha <- (1 - lambda) alpha + lambda s, s = mu_N e_i + mu_A e_l
            lam = 2.0 / (rule.n_iter + 2 + step_offset)
            atoms = [r["fw_normal"]] + ([r["fw_anomaly"]] if r["fw_anomaly"] >= 0 else [])
            cols = op.columns(op.atoms(atoms, alpha)[0])
            Ka.mul_(1.0 - lam).add_(cols[:, 0], alpha=lam * coefs["mu_normal"])
            alpha.mul_(1.0 - lam)
            add_local(atoms[0], lam * coefs["mu_normal"])
            if len(atoms) == 2:
                Ka.sub_(cols[:, 1], alpha=lam * coefs["mu_anomaly"])
                add_local(atoms[1], lam * coefs["mu_anomaly"])
        else:  # pairwise: mass from the away atom to the oracle's, in the class violating optimality most
            viol = {c: r[f"g_away_{c}"] - r[f"g_fw_{c}"] if r[f"away_{c}"] >= 0 else 0.0 for c in ("normal", "anomaly")}
            c = "normal" if viol["normal"] >= viol["anomaly"] else "anomaly"
            s, a = r[f"fw_{c}"], r[f"away_{c}"]
            if s == a or viol[c] <= 0:
                rule.stop(stalled=True, status="nothing left to move: the pairwise direction is zero in rounding")
                break
            rows, weights = op.atoms([s, a], alpha)
            K = op.gram(rows)
            curvature = float(K[0, 0] + K[1, 1] - 2 * K[0, 1])
            step = ops.pairwise_step(r[f"g_fw_{c}"], r[f"g_away_{c}"], float(weights[0]), float(weights[1]),
                                     curvature, coefs[f"pen_{c}"], coefs["q"])
            cols = op.columns(rows)
            Ka.add_(cols[:, 0] - cols[:, 1], alpha=step if c == "normal" else -step)
            add_local(s, step)
            add_local(a, -step)
        rule.step()
    result = SolveResult(alpha, Ka, r["objective"], r["gap"], rule.n_iter, op.n_matvec, rule.converged, method,
                         rule.history, time.perf_counter() - start, stalled=rule.stalled, status=rule.status)
    return result, r

