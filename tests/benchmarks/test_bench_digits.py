"""Digits one-vs-rest (raw pixels, 50% labelled anomalies): does optimality change the detector?

    pytest tests/benchmarks/test_bench_digits.py -o addopts="" --benchmark-only -s
"""

import json

from benchmarks.digits_study import digits_lpsvdd_study


def test_digits_lpsvdd_vs_ocsvm(benchmark):
    result = digits_lpsvdd_study(ratio=0.5, seed=0)
    print("\n" + json.dumps(result["mean"], indent=1))
    for r in result["per_class"]:
        print(f"class {r['class']}: optimum {r['lpsvdd_optimum']:.4f} paper-FW {r['lpsvdd_paper_fw']:.4f} "
              f"OCSVM {r['ocsvm']:.4f} (paper FW {100 * r['paper_fw_above_optimum']:.2f}% above the optimum)")
    benchmark.extra_info.update(result["mean"])
    benchmark.pedantic(lambda: None, rounds=1)
