"""The sharded alpha-step on 1 and 2 processes (gloo, one thread each) beside the
compiled single-process pairwise Frank-Wolfe, with the bytes each rank hands
to the collectives counted.

    pytest tests/benchmarks/test_bench_distributed.py -o addopts="" --benchmark-only -s

Per iteration: seconds (from the difference between a solve of ITERS
iterations and one of 0, so the start's product and the set-up cancel) and
bytes passed to all_reduce / all_gather / broadcast by rank 0. The start's
product (once per solve) is reported apart, and the latency of one small
all_reduce, which bounds what a second rank can save per iteration.
"""

import json
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks.features import clustered_features
from dlmsvdd_ext import distributed, kernels
from dlmsvdd_ext.dual import DualProblem
from dlmsvdd_ext.kernel_operator import RbfOnTheFly
from dlmsvdd_ext.solver import solve

N, D, M, ITERS, GAMMA = 20000, 64, 512, 400, 1.0


def problem():
    X, t = clustered_features(N - N // 10, N // 10, D, seed=0)
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(1))
    return X[perm].contiguous(), t[perm].contiguous()


class ByteCounter:
    """Counts the bytes of the tensors given to the collectives."""

    def __init__(self):
        self.bytes = 0
        self.originals = {name: getattr(dist, name) for name in ("all_reduce", "all_gather", "broadcast")}
        for name, fn in self.originals.items():
            setattr(dist, name, self._counting(fn))

    def _counting(self, fn):
        def call(tensor, *args, **kwargs):
            first = tensor[0] if isinstance(tensor, list) else tensor  # all_gather: the output list first
            sent = args[0] if isinstance(tensor, list) else first
            self.bytes += sent.numel() * sent.element_size()
            return fn(tensor, *args, **kwargs)
        return call


def _timed(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _rank_main(rank, world, init_file, out):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    counter = ByteCounter()
    X, t = problem()
    shard = distributed.Shard(N)
    X_r, t_r = X[shard.start:shard.stop], t[shard.start:shard.stop]
    dual = DualProblem.from_labels(t_r, counts=(int((t > 0).sum()), int((t < 0).sum())))
    rff = kernels.make("rff", GAMMA, M, random_state=0).fit(X_r)
    ops_ = {"exact": distributed.ShardedExact(shard, X_r, GAMMA), "rff": distributed.ShardedFactor(shard, rff.Z_)}
    one = torch.zeros(1, dtype=torch.float64)
    dist.barrier()
    report = {"latency_s": _timed(lambda: [dist.all_reduce(one) for _ in range(200)]) / 200}
    for name, op in ops_.items():
        run = {}
        for iters in (0, ITERS):
            dist.barrier()
            before = counter.bytes
            seconds = _timed(lambda: distributed.solve(op, dual, "pairwise", max_iter=iters, tol=0.0))
            run[iters] = (seconds, (counter.bytes - before) / 3)
        report[name] = {"start_s": run[0][0], "start_bytes": run[0][1],
                        "iter_s": (run[ITERS][0] - run[0][0]) / ITERS,
                        "iter_bytes": (run[ITERS][1] - run[0][1]) / ITERS}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(report, f)
    dist.destroy_process_group()


def compiled_single_process() -> dict:
    """The compiled pairwise loop on the whole set, one thread (the baseline)."""
    torch.set_num_threads(1)
    X, t = problem()
    dual = DualProblem.from_labels(t)
    ops_ = {"exact": RbfOnTheFly(X, GAMMA, 256 << 20),
            "rff": kernels.make("rff", GAMMA, M, random_state=0).fit(X).operator()}
    report = {}
    for name, op in ops_.items():
        t0 = _timed(lambda: solve(op, dual, "pairwise", max_iter=0, tol=0.0))
        t1 = _timed(lambda: solve(op, dual, "pairwise", max_iter=ITERS, tol=0.0))
        report[name] = {"start_s": t0, "iter_s": (t1 - t0) / ITERS}
    return report


def sharded(world, tmp_path) -> dict:
    out = tmp_path / f"world{world}.json"
    mp.spawn(_rank_main, args=(world, str(tmp_path / f"init{world}"), str(out)), nprocs=world, join=True)
    return json.loads(out.read_text())


@pytest.mark.parametrize("kernel", ["exact", "rff"])
def test_sharded_alpha_step_scaling(benchmark, tmp_path, kernel):
    threads = torch.get_num_threads()
    base = compiled_single_process()[kernel]
    torch.set_num_threads(threads)
    reports = {world: sharded(world, tmp_path) for world in (1, 2)}
    runs = {world: r[kernel] for world, r in reports.items()}
    print(f"\n{kernel} (N={N}, d={D}{', m=%d' % M if kernel != 'exact' else ''}), pairwise FW, per iteration:")
    print(f"  compiled, 1 process:  {base['iter_s'] * 1e3:8.3f} ms   start {base['start_s'] * 1e3:8.1f} ms")
    for world, r in runs.items():
        print(f"  sharded, {world} process(es): {r['iter_s'] * 1e3:8.3f} ms "
              f"({r['iter_s'] / base['iter_s']:.2f}x the compiled loop), {r['iter_bytes']:.0f} bytes/iter/rank; "
              f"start {r['start_s'] * 1e3:8.1f} ms, {r['start_bytes'] / 1e6:.2f} MB/rank")
    print(f"  latency of one 8-byte all_reduce: {reports[2]['latency_s'] * 1e6:.0f} us with 2 processes")
    benchmark.extra_info.update({"compiled_iter_s": base["iter_s"], "latency_s": reports[2]["latency_s"], **{
        f"world{w}_{k}": v for w, r in runs.items() for k, v in r.items()}})
    benchmark.pedantic(lambda: None, rounds=1)
