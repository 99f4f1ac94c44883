"""DLM-SVDD on digits one-vs-rest beside the raw-pixel detectors, and the time per epoch.

    pytest tests/benchmarks/test_bench_trainer.py -o addopts="" --benchmark-only -s

Mean test AUROC over the 10 classes at anomaly ratios 10%, 50%, 75%, mean +- std
over 3 seeds: DLM-SVDD joint (small CNN, 30 epochs), DLM-SVDD with the CNN
fixed at its (random) initialisation, LpSVDD and OneClassSVM on raw pixels.
"""

from benchmarks.digits_study import METHODS, digits_method_table


def test_digits_method_table(benchmark):
    result = digits_method_table()
    lines = ["| ratio | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
    for ratio, row in result["table"].items():
        lines.append(f"| {ratio:.0%} | " + " | ".join(f"{row[m][0]:.4f} +- {row[m][1]:.4f}" for m in METHODS) + " |")
    print("\n" + "\n".join(lines))
    t = result["timing"]
    print(f"DLM-SVDD joint, mean seconds per epoch: feature pass {t['seconds_features']:.4f}, "
          f"alpha-step {t['seconds_alpha']:.4f}, omega-step {t['seconds_omega']:.4f}")
    benchmark.extra_info.update({f"{m}@{r}": v[0] for r, row in result["table"].items() for m, v in row.items()})
    benchmark.extra_info.update(t)
    benchmark.pedantic(lambda: None, rounds=1)
