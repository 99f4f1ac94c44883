"""Issue 38: with labels, does the input consensus add to the labelled detectors? Validation rows of
the semi-supervised tasks (``consensus_with_labels``); mean AUROC per la and family.

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_consensus_with_labels.py -o addopts="" -s

Needs ../shared/data/adbench-dev (skipped without it).
"""

import numpy as np
import pytest

from benchmarks import adbench_protocol as protocol
from benchmarks import consensus_with_labels as study


@pytest.mark.skipif(not protocol.DATA_DIR.is_dir(), reason=f"no ADBench development data at {protocol.DATA_DIR}")
def test_consensus_with_labels(benchmark):
    sets, seeds, _, _ = protocol.selection({})
    records = study.run(sets, seeds, log=None)
    keys = [k for k in records[0] if k not in ("set", "seed", "la", "family")]
    print(f"\n{len(sets)} sets x seeds {seeds}, validation rows; mean AUROC")
    print("| la | family | " + " | ".join(keys) + " |")
    for la in study.FRACTIONS:
        for family in sorted({r["family"] for r in records}):
            rows = [r for r in records if r["la"] == la and r["family"] == family]
            print(f"| {la} | {family} | " + " | ".join(f"{np.mean([r[k] for r in rows]):.4f}" for k in keys) + " |")
    assert all(0.0 <= r[k] <= 1.0 for r in records for k in keys)
    benchmark.pedantic(lambda: None, rounds=1)
