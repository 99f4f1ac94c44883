"""The GPU's RBF products and the other CUDA ops against their floors (issue 48), on one GPU in one run.

Timed with CUDA events: a warm-up, then the median of several calls; inputs rotate among copies
when one copy would fit in L2 (so that no call reads a warm cache the next one would not have).
Rows (float32 unless said):

* ``rbf_matvec`` (X != Y, V one column): ours (cuBLAS SGEMM + epilogue), ours with ``products="3xtf32"``,
  torch (blocked addmm + exp + mv), and the bare cuBLAS SGEMM of the same shape (X Y^T in row blocks
  into one buffer: what the fused product must contain); each one's relative error against float64 on
  256 rows; float64 against DGEMM.
* ``rbf_gram``: ours (both product modes) against the SGEMM that writes the same matrix.
* FWHT, the SORF and Fastfood maps and ``matvec64`` against the memory floor: bytes read and written
  over the measured device-to-device copy rate.
* the alpha-step at ImageNet-LT's size (N = 115,846, d = 2048): seconds per exact-kernel product on the
  fly and products per second, and the nystrom / sorf fits at m = 1024.

``run()`` returns the rows; ``markdown(rows)`` the table the docs' performance page carries.
"""

from __future__ import annotations

import math
import os
import statistics
import time

import torch

from dlmsvdd_ext import LpSVDD, kernels, ops, rbf_gemm

# GPU_BENCH_DEVICE=cpu: a dry run of the same code at small sizes (with cuda_emulation), on a machine without a GPU
DEVICE = os.environ.get("GPU_BENCH_DEVICE", "cuda")
DRY = DEVICE == "cpu"
MATVEC_SHAPES = [(300, 64)] if DRY else [(6000, 512), (6000, 2048), (50000, 512), (50000, 2048), (200000, 64)]
if os.environ.get("GPU_BENCH_SHAPES"):  # "6000x2048,200000x64": a subset
    MATVEC_SHAPES = [tuple(int(v) for v in shape.split("x")) for shape in os.environ["GPU_BENCH_SHAPES"].split(",")]
FLOAT64_SHAPES = [(300, 64)] if DRY else [(6000, 512), (6000, 2048), (50000, 512)]
GRAM_SHAPES = [(300, 64)] if DRY else [(6000, 512), (6000, 2048), (50000, 512)]
ERROR_ROWS = 64 if DRY else 256
EMULATION = {"cuda_emulation": True} if DRY else {}


def event_ms(fn, reps: int = 5, warm: int = 1) -> float:
    """Median milliseconds of ``fn(i)`` (i: the call's number) between CUDA events."""
    for i in range(warm):
        fn(i)
    if DRY:
        return 1e3 * statistics.median(_wall(fn, warm + i) for i in range(reps))
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(warm + i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _emit(row: dict) -> dict:
    """A row printed as soon as it is measured (a run cut short keeps what it measured)."""
    print("ROW", {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    return row


def _wall(fn, i) -> float:
    start = time.perf_counter()
    fn(i)
    return time.perf_counter() - start


def _copies(nbytes: int) -> int:
    """Copies of an input that rotate so that none is still in L2 when it is used again."""
    l2 = 1 << 20 if DRY else getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    return min(4, max(1, math.ceil(2 * l2 / max(nbytes, 1))))


def unit_rows(n: int, d: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g, device=DEVICE, dtype=dtype), dim=1)


def torch_matvec(X, Y, v, gamma, block=4096):
    """The usual torch way: addmm for the expansion, exp, mv, in row blocks."""
    y_norm = (Y * Y).sum(1)
    out = torch.empty(X.shape[0], dtype=X.dtype, device=X.device)
    for i in range(0, X.shape[0], block):
        xb = X[i:i + block]
        sq = torch.addmm(y_norm[None, :] + (xb * xb).sum(1)[:, None], xb, Y.T, alpha=-2.0)
        out[i:i + block] = torch.exp(sq.clamp_min_(0).mul_(-gamma)) @ v
    return out


def bare_products(X, Y, buffer):
    """X Y^T in row blocks into one buffer: the matrix product the RBF product contains."""
    rows = buffer.shape[0]
    for i in range(0, X.shape[0], rows):
        xb = X[i:i + rows]
        torch.mm(xb, Y.T, out=buffer[:xb.shape[0]])


def reference_rows(X, Y, v, gamma):
    """float64 K(X[:ERROR_ROWS], Y) v from explicit differences."""
    x, y = X[:ERROR_ROWS].double(), Y.double()
    d = torch.cdist(x, y).square() if False else (x.square().sum(1)[:, None] + y.square().sum(1)[None]
                                                    - 2 * x @ y.T).clamp_min(0)
    return torch.exp(-gamma * d) @ v.double()


def _rel(out, ref):
    return float((out.double() - ref).abs().max() / ref.abs().max())


def matvec_rows(shapes=MATVEC_SHAPES, dtype=torch.float32) -> list[dict]:
    rows = []
    for n, d in shapes:
        gamma = 1.0
        k = _copies(n * d * (4 if dtype == torch.float32 else 8))
        Xs = [unit_rows(n, d, 2 * c, dtype) for c in range(k)]
        Ys = [unit_rows(n, d, 2 * c + 1, dtype) for c in range(k)]
        v = torch.randn(n, generator=torch.Generator(device=DEVICE).manual_seed(7), device=DEVICE, dtype=dtype)
        ref = reference_rows(Xs[0], Ys[0], v, gamma)
        buffer = torch.empty(min(n, 4096), n, dtype=dtype, device=DEVICE)
        row = {"op": "rbf_matvec", "dtype": str(dtype).replace("torch.", ""), "n": n, "d": d}
        modes = ["float32", "3xtf32"] if dtype == torch.float32 else ["float32"]
        for mode in modes:
            out = ops.rbf_matvec(Xs[0][:ERROR_ROWS], Ys[0], v, gamma, products=mode, **EMULATION)
            row[f"err_{mode}"] = _rel(out, ref)
            row[f"ms_{mode}"] = event_ms(lambda i: ops.rbf_matvec(Xs[i % k], Ys[i % k], v, gamma, products=mode, **EMULATION))
        row["err_torch"] = _rel(torch_matvec(Xs[0][:ERROR_ROWS], Ys[0], v, gamma), ref)
        row["ms_torch"] = event_ms(lambda i: torch_matvec(Xs[i % k], Ys[i % k], v, gamma))
        with rbf_gemm.float32_products("ieee"):
            row["ms_gemm"] = event_ms(lambda i: bare_products(Xs[i % k], Ys[i % k], buffer))
        flops = 2.0 * n * n * d
        row["tflops_gemm"] = flops / row["ms_gemm"] / 1e9
        for mode in modes:
            row[f"vs_gemm_{mode}"] = row["ms_gemm"] / row[f"ms_{mode}"]
            row[f"vs_torch_{mode}"] = row["ms_torch"] / row[f"ms_{mode}"]
        rows.append(_emit(row))
        del Xs, Ys, buffer
        torch.cuda.empty_cache()
    return rows


def tile_rows(shapes=((300, 64),) if DRY else ((50000, 512), (200000, 64)),
              budgets=(32 << 20, 128 << 20, 512 << 20)) -> list[dict]:
    """ours (float32 products) at other tile budgets: which one the default should be."""
    rows = []
    for n, d in shapes:
        X, Y = unit_rows(n, d, 0), unit_rows(n, d, 1)
        v = torch.randn(n, device=DEVICE)
        row = {"op": "rbf_matvec tiles", "n": n, "d": d}
        for budget in budgets:
            out = torch.empty(n, device=DEVICE)
            row[f"ms_{budget >> 20}MB"] = event_ms(
                lambda i: rbf_gemm.matvec(X, Y, v, out, 1.0, False, "float32", DRY, budget), reps=3)
        rows.append(row)
    return rows


def gram_rows(shapes=GRAM_SHAPES) -> list[dict]:
    rows = []
    for n, d in shapes:
        X, Y = unit_rows(n, d, 0), unit_rows(n, d, 1)
        out = torch.empty(n, n, device=DEVICE)
        row = {"op": "rbf_gram", "dtype": "float32", "n": n, "d": d}
        ref = torch.exp(-(X[:ERROR_ROWS].double().square().sum(1)[:, None] + Y.double().square().sum(1)[None]
                          - 2 * X[:ERROR_ROWS].double() @ Y.double().T).clamp_min(0))
        for mode in ("float32", "3xtf32"):
            row[f"err_{mode}"] = _rel(ops.rbf_gram(X[:ERROR_ROWS], Y, 1.0, products=mode, **EMULATION), ref)
            row[f"ms_{mode}"] = event_ms(lambda i: ops.rbf_gram(X, Y, 1.0, products=mode, **EMULATION), reps=3)
        with rbf_gemm.float32_products("ieee"):
            row["ms_gemm"] = event_ms(lambda i: torch.mm(X, Y.T, out=out), reps=3)
        for mode in ("float32", "3xtf32"):
            row[f"vs_gemm_{mode}"] = row["ms_gemm"] / row[f"ms_{mode}"]
        rows.append(row)
        del X, Y, out
        torch.cuda.empty_cache()
    return rows


def memory_rows() -> list[dict]:
    """FWHT, SORF, Fastfood and matvec64 against the device-to-device copy rate."""
    rows = []
    src = torch.empty(1 << (16 if DRY else 28), dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    copy_ms = event_ms(lambda i: dst.copy_(src))
    rate = 2 * src.numel() / copy_ms / 1e6  # GB/s: read + write
    rows.append({"op": "device copy", "GB_per_s": rate})
    del src, dst
    n = 64 if DRY else 65536
    x = torch.randn(n, 1024, device=DEVICE)
    ms = event_ms(lambda i: ops.fwht(x))
    rows.append({"op": "fwht", "n": n, "d": 1024, "ms": ms, "floor_ms": 2 * x.numel() * 4 / rate / 1e6})
    n = 300 if DRY else 200000
    X = unit_rows(n, 512, 0)
    for name in ("sorf", "fastfood"):
        backend = kernels.make(name, gamma=1.0, n_components=1024, random_state=0).fit(X[:1000])
        backend.transform(X[:1000])
        ms = event_ms(lambda i: backend.transform(X), reps=3)
        floor = (X.numel() + X.shape[0] * 1024) * 4 / rate / 1e6
        rows.append({"op": f"{name} map", "n": n, "d": 512, "m": 1024, "ms": ms, "floor_ms": floor})
    A = torch.randn(n, 1024, device=DEVICE)
    w = torch.randn(1024, dtype=torch.float64, device=DEVICE)
    ms = event_ms(lambda i: ops.matvec64(A, w))
    rows.append({"op": "matvec64", "n": n, "m": 1024, "ms": ms, "floor_ms": A.numel() * 4 / rate / 1e6})
    return rows


def imagenet_lt_rows(n: int = 300 if DRY else 115846, d: int = 64 if DRY else 2048) -> list[dict]:
    """The alpha-step at ImageNet-LT's size: exact-kernel products on the fly; nystrom and sorf fits."""
    X = unit_rows(n, d, 0)
    a = torch.randn(n, device=DEVICE)
    rows = []
    for mode in ("float32", "3xtf32"):
        ms = event_ms(lambda i: ops.rbf_matvec(X, None, a, 1.0, products=mode, **EMULATION), reps=2)
        rows.append({"op": f"exact K a, N={n}, d={d}", "products": mode, "ms": ms, "products_per_s": 1e3 / ms,
                     "tflops": 2.0 * n * n * d / ms / 1e9})
    for kernel in ("nystrom", "sorf"):
        model = LpSVDD(kernel=kernel, n_components=64 if DRY else 1024, random_state=0, device=DEVICE)
        _sync()
        start = time.perf_counter()
        model.fit(X)
        _sync()
        rows.append({"op": f"LpSVDD fit {kernel} m=1024, N={n}, d={d}", "s": time.perf_counter() - start,
                     "n_iter": int(model.n_iter_), "converged": bool(model.converged_)})
    return rows


def _sync():
    if not DRY:
        torch.cuda.synchronize()


def run(sections=("matvec", "float64", "gram", "tiles", "memory", "imagenet_lt")) -> list[dict]:
    table = {"matvec": matvec_rows, "float64": lambda: matvec_rows(FLOAT64_SHAPES, torch.float64),
             "gram": gram_rows, "tiles": tile_rows, "memory": memory_rows, "imagenet_lt": imagenet_lt_rows}
    rows = []
    for name in [s for s in sections if s in table]:  # the training benchmark's sections are not ours
        start = time.perf_counter()
        rows += table[name]()
        print(f"[gpu_kernels {name}: {time.perf_counter() - start:.1f} s]", flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as tables, one per run of rows with the same columns."""
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    tables, keys = [], None
    for row in rows:
        if list(row) != keys:
            keys = list(row)
            tables.append(["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)])
        tables[-1].append("| " + " | ".join(fmt(row[k]) for k in keys) + " |")
    return "\n\n".join("\n".join(t) for t in tables)


def report(name: str, rows: list[dict]) -> None:
    """Print the rows' tables with the GPU's name, and write them to $GPU_BENCH_OUT/<name>.md (and .json
    with GPU_BENCH_JSON set): what .ci/gpu-check brings back."""
    import json
    from pathlib import Path

    device = torch.cuda.get_device_name(0)
    table = markdown(rows)
    print(f"\n{device}, torch {torch.__version__}\n{table}")
    out = Path(os.environ.get("GPU_BENCH_OUT", ".benchmarks"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(f"{device}\n\n{table}\n")
    if os.environ.get("GPU_BENCH_JSON"):
        (out / f"{name}.json").write_text(json.dumps({"device": device, "rows": rows}))
