"""The paper's protocol on Fashion-MNIST or CIFAR-10 (issue 50), DLM-SVDD beside its peers in the
same run (``benchmarks.paper_protocol``); the data from ``python3 ../shared/data/images/fetch_images.py``.

    PAPER_ROOT=~/.cache/dlmsvdd-images PAPER_DATA=fashion_mnist PAPER_RATIOS=0.1,0.75 \\
        OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_paper_protocol.py -o addopts="" -s

PAPER_PROTOCOL (labelled, unlabelled or long-tailed), PAPER_CLASSES, PAPER_SEEDS, PAPER_RHOS and
PAPER_SET (comma-separated KEY=VALUE TrainConfig fields) choose the run; PAPER_OUTPUT names its
records file (finished tasks are skipped when it is run again). Skipped without PAPER_ROOT.
"""

import os
import time

import pytest

from benchmarks import paper_protocol

ROOT = os.environ.get("PAPER_ROOT")


@pytest.mark.skipif(not ROOT, reason="PAPER_ROOT (the fetch script's folder) is not set")
def test_paper_protocol(tmp_path):
    data, protocol = os.environ.get("PAPER_DATA", "fashion_mnist"), os.environ.get("PAPER_PROTOCOL", "labelled")
    numbers = lambda name, default, kind: [kind(v) for v in os.environ.get(name, default).split(",")]  # noqa: E731
    overrides = dict(paper_protocol_assignment(text) for text in os.environ.get("PAPER_SET", "").split(",") if text)
    start = time.perf_counter()
    records = paper_protocol.run(data, os.path.expanduser(ROOT), protocol,
                                 os.environ.get("PAPER_OUTPUT", tmp_path / "records.jsonl"),
                                 numbers("PAPER_CLASSES", "0,1,2,3,4,5,6,7,8,9", int), numbers("PAPER_SEEDS", "0", int),
                                 numbers("PAPER_RATIOS", "0.1,0.75", float), numbers("PAPER_RHOS", "100,50,10", float),
                                 overrides=overrides)
    print(f"\n{data}, {protocol} protocol: {time.perf_counter() - start:.0f} s")
    print({"labelled": paper_protocol.labelled_table, "unlabelled": paper_protocol.unlabelled_table,
           "long-tailed": paper_protocol.long_tailed_table}[protocol](records, data))
    for row, holds in paper_protocol.goal_rows(records, data):
        print(f"{'holds' if holds else 'FAILS'}: {row}")
    assert records and all(r["auroc"] is None or 0.0 <= r["auroc"] <= 1.0 for r in records)


def paper_protocol_assignment(text):
    from dlmsvdd.experiments.presets import parse_assignment

    return parse_assignment(text)
