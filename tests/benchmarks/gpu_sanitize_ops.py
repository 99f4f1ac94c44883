"""Every CUDA op once at small, tile-unaligned sizes, for compute-sanitizer (memcheck, racecheck):
the RBF products of both product modes and their epilogues, the fused Gram kernel through the
Frank-Wolfe column cache and RPCholesky, FWHT, matvec64, the seven feature maps, LpSVDD fits with
each solver, and two epochs of DLM-SVDD (the omega-step's gradient through the kernel).
``--quick`` (for racecheck, which is slow): the fits capped at 20 iterations, no DLM-SVDD."""

import sys

import numpy as np
import torch

from dlmsvdd_ext import LpSVDD, kernels, ops

DEVICE = "cuda"
g = torch.Generator().manual_seed(0)
for dtype in (torch.float32, torch.float64):
    X = torch.randn(67, 33, generator=g, dtype=dtype).to(DEVICE)
    Y = torch.randn(131, 33, generator=g, dtype=dtype).to(DEVICE)
    V = torch.randn(131, 3, generator=g, dtype=dtype).to(DEVICE)
    modes = ("float32", "3xtf32") if dtype == torch.float32 else ("float32",)
    for products in modes:
        ops.rbf_matvec(X, Y, V, 0.1, products=products)
        ops.rbf_matvec(X, None, V[:67], 0.1, products=products)
        ops.rbf_matvec(X, Y, torch.randn(131, 12, generator=g, dtype=dtype).to(DEVICE), 0.1, products=products)
        ops.rbf_gram(X, Y, 0.1, products=products)
        ops.rbf_gram(X, None, 0.1, products=products)
    ops.rbf_columns(X, Y[:5], 0.1)
    ops.sq_distances(X, Y)
    ops.fwht(torch.randn(7, 1024, generator=g, dtype=dtype).to(DEVICE))
    A = torch.randn(300, 40, generator=g, dtype=dtype).to(DEVICE)[:, 3:36]
    ops.matvec64(A, torch.randn(33, dtype=torch.float64).to(DEVICE))
    ops.rmatvec64(A, torch.randn(300, dtype=torch.float64).to(DEVICE))
Xf = (torch.randn(500, 100, generator=g) / 10).to(DEVICE)
for kernel in ["rff", "orf", "sorf", "fastfood", "nystrom", "rpcholesky", "qmc_rff"]:
    kernels.make(kernel, gamma=0.5, n_components=200, random_state=0).fit(Xf).transform(Xf)
ops.rpcholesky(Xf.double(), 0.5, 50, seed=3, block_size=16)
rng = np.random.default_rng(0)
Xs = np.vstack([rng.standard_normal((300, 16)), rng.standard_normal((30, 16)) + 1.5]).astype(np.float32)
ys = np.r_[np.ones(300), -np.ones(30)]
QUICK = "--quick" in sys.argv
for kernel in ("exact", "nystrom", "sorf"):
    for solver in ("apg", "pairwise", "paper"):
        LpSVDD(kernel=kernel, n_components=64, solver=solver, random_state=0, device=DEVICE,
               max_iter=20 if QUICK else 300).fit(Xs, ys)
if QUICK:
    torch.cuda.synchronize()
    print("SANITIZE SCRIPT DONE")
    sys.exit(0)

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks  # noqa: E402

task = tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)
DLMSVDD(TrainConfig(backbone="small_cnn", weights=None, epochs=2, kernel="exact", verbose=0, device=DEVICE)).fit(
    task.train, task.val).dissimilarity(task.test)
torch.cuda.synchronize()
print("SANITIZE SCRIPT DONE")
