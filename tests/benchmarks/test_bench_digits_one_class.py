"""Digits one class normal without any label (issue 38, goal 3's image row): ``DLMSVDD()`` against
a 5-nearest-neighbour distance and the other detectors on the pixels, all 10 classes x seeds 0-2,
the same fit images for every method (``benchmarks.digits_one_class``).

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_digits_one_class.py -o addopts="" -s

DIGITS_SOURCE=development runs it on digits' training pool split again (the protocol a choice for
images is made on; the test pool is not read).
"""

import os
import time

from benchmarks import digits_one_class


def test_digits_one_class_without_labels():
    source = os.environ.get("DIGITS_SOURCE", "test")
    start = time.perf_counter()
    records = digits_one_class.run(source)
    print(f"\ndigits one-class ({source} protocol), 10 classes x seeds {list(digits_one_class.SEEDS)}; "
          f"{time.perf_counter() - start:.0f} s")
    print(digits_one_class.table(records))
    row, ok = digits_one_class.goal_row(records)
    print(f"{'holds' if ok else 'FAILS'}: {row}")
    assert all(0.0 <= r["auroc"] <= 1.0 for r in records)
