"""How much of DLM-SVDD's seed spread its own training adds, per small-CNN width (issue 16).

    pytest tests/benchmarks/test_bench_width.py -o addopts="" --benchmark-only -s

On the development protocol (digits' training pool split again; the test pool is never
read), each task's split fixed and only the network's seed varied (0-3), 10 classes x
3 ratios: the spread left is the training's own. 64 looked steadier here, and measured
worse than 32 on digits' test pool at ratio 0.75 (README). About 15 minutes on one core.
"""

from benchmarks.digits_study import width_noise_study


def test_width_noise_study(benchmark):
    result = benchmark.pedantic(width_noise_study, rounds=1)  # the benchmark's time is the whole study's
    print("\n| ratio | width | mean AUROC | std over seeds (class mean) | per-task std | fit seconds |")
    print("|---|---|---|---|---|---|")
    for (ratio, width), row in result.items():
        print(f"| {ratio} | {width} | {row['mean']:.4f} | {row['seed_std']:.5f} | {row['task_std']:.4f} | "
              f"{row['seconds']:.2f} |")
    benchmark.extra_info.update({f"{r}/{w}": row for (r, w), row in result.items()})
