"""DLM-SVDD on digits one-vs-rest beside the detectors a user would pick instead (issue 16).

    pytest tests/benchmarks/test_bench_trainer.py -o addopts="" --benchmark-only -s

Mean test AUROC over the 10 classes at anomaly ratios 10%, 50%, 75%, mean +- std
over 3 seeds, and the mean fit seconds: DLM-SVDD as a user gets it for the small CNN
from scratch (its default recipe), with the paper's recipe, with the old demo's
settings and with its pretrained CNN fixed; LpSVDD and OneClassSVM on raw pixels,
scikit-learn's RBF SVC and logistic regression on the same labelled images; and
ablations of the default (an autoencoder in step 0; no step 0; the paper's best-epoch
selection; one CNN branch instead of four). About 50 minutes on one core.
"""

from benchmarks.digits_study import METHODS, PIXEL_METHODS, digits_method_table, markdown_table


def test_digits_method_table(benchmark):
    result = benchmark.pedantic(digits_method_table, rounds=1)  # the benchmark's time is the whole table's
    table = result["table"]
    print("\n" + markdown_table(table))
    for ratio, row in table.items():  # the goal: the default at or above every pixel detector
        best = max(PIXEL_METHODS, key=lambda m: row[m]["mean"])
        print(f"ratio {ratio}: default {row['dlmsvdd']['mean']:.4f} +- {row['dlmsvdd']['std']:.4f}, best pixel "
              f"detector {best} {row[best]['mean']:.4f} +- {row[best]['std']:.4f}, frozen CNN "
              f"{row['dlmsvdd_frozen']['mean']:.4f}")
    benchmark.extra_info.update({f"{m}@{r}": row[m]["mean"] for r, row in table.items() for m in METHODS})
    benchmark.extra_info["rows"] = result["rows"]  # per task, for --benchmark-json
