"""ADBench's semi-supervised protocol on the 18 development sets (issue 28): mean test AUROC per
labelled fraction, average rank and fit seconds of DLM-SVDD, LpSVDD and the baselines.

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_adbench.py -o addopts="" -s

Needs ../shared/data/adbench-dev (skipped without it) and, for XGBoost, Deep SAD and DevNet,
``pip install 'dlmsvdd[adbench]'``. A quick run on a subset: ADBENCH_SETS=glass,wine
ADBENCH_SEEDS=0 ADBENCH_LA=0.25 ADBENCH_METHODS=LpSVDD,SVC (comma-separated substrings).
Every per-task result goes to $ADBENCH_JSON (default: a file in a new temporary folder).
"""

import time

import pytest

from benchmarks import adbench_protocol as protocol
from benchmarks.adbench_methods import METHODS, versions


@pytest.mark.skipif(not protocol.DATA_DIR.is_dir(), reason=f"no ADBench development data at {protocol.DATA_DIR}")
def test_adbench_development_protocol():
    sets, seeds, las, methods = protocol.selection(METHODS)
    assert sets and methods, "ADBENCH_SETS / ADBENCH_METHODS selected nothing"
    start = time.perf_counter()
    records = protocol.run(methods, sets, seeds, las)
    summary = protocol.summary(records)
    meta = {"sets": sets, "seeds": seeds, "la": las, "versions": versions(),
            "wall_seconds": time.perf_counter() - start}
    path = protocol.write_json(records, summary, meta)
    print(f"\n{len(sets)} sets x seeds {seeds} x la {las}; {meta['wall_seconds']:.0f} s; versions {meta['versions']}")
    print(protocol.table(summary, las))
    print(f"per-task results: {path}")
    rows = protocol.labels_never_hurt_rows(records)  # issue 38's goal 4, wherever both fits ran
    print("\n".join(f"{'holds' if ok else 'FAILS'}: {row}" for row, ok in rows if "nan" not in row))
    assert any(s["tasks"] for s in summary.values())
    full = (sets == protocol.available_sets() and seeds == list(protocol.SEEDS)
            and las == list(protocol.LABELLED_FRACTIONS) and methods == METHODS)
    if full:  # issue 28's goal rows: on the whole protocol only (a subset is for quick looks)
        rows = protocol.goal_rows(records)
        print("\n".join(f"{'holds' if ok else 'FAILS'}: {row}" for row, ok in rows))
        assert all(ok for _, ok in rows)
