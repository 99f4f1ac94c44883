"""Images, one class normal, without any label (issue 38, goal 3's image row on digits): ``DLMSVDD()``
against a 5-nearest-neighbour distance and the other detectors on the pixels, every class x seeds
0-2, the same fit images for every method (``benchmarks.one_class_images``).

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_one_class_images.py -o addopts="" -s

ONE_CLASS_PROTOCOL=development runs it on the training pool split again (the protocol a choice for
images is made on; the test pool is not read). ONE_CLASS_DATA=fashion_mnist (or cifar10, ...) with
ONE_CLASS_ROOT=<data root> runs it on another image set (``dlmsvdd.datasets.load``);
ONE_CLASS_FIT_PER_CLASS=1000 fits on at most 1000 images of a class, ONE_CLASS_SEEDS=0 on seed 0 alone.
"""

import os
import time

from benchmarks import one_class_images


def test_one_class_images_without_labels():
    data, protocol = os.environ.get("ONE_CLASS_DATA", "digits"), os.environ.get("ONE_CLASS_PROTOCOL", "test")
    start = time.perf_counter()
    per_class = os.environ.get("ONE_CLASS_FIT_PER_CLASS")
    seeds = tuple(int(s) for s in os.environ.get("ONE_CLASS_SEEDS", "0,1,2").split(","))
    records = one_class_images.run(data, os.environ.get("ONE_CLASS_ROOT"), protocol, seeds,
                                   fit_per_class=None if per_class is None else int(per_class))
    print(f"\n{data} one class normal ({protocol} protocol), every class x seeds {list(seeds)}, fit on "
          f"{'every' if per_class is None else 'at most ' + per_class} image(s) of the class; "
          f"{time.perf_counter() - start:.0f} s")
    print(one_class_images.table(records))
    row, ok = one_class_images.goal_row(records)
    print(f"{'holds' if ok else 'FAILS'}: {row}")
    assert all(0.0 <= r["auroc"] <= 1.0 for r in records)
