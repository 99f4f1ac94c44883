"""Issue 49's benchmark: both ADBench protocols on the 37 development sets, seeds 0-2, per family,
each default's plain test mean beside the leave-sets-out estimate of the rule it was chosen by, with
the peers at their defaults in the same run (``benchmarks.adbench_leave_sets_out``).

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_adbench_leave_sets_out.py -o addopts="" -s

Needs ../shared/data/adbench-dev (skipped without it). About 70 minutes on one core; the module's
command line (``python tests/benchmarks/adbench_leave_sets_out.py --help``) splits it over processes
and resumes from its cache. A quick run: ADBENCH_SETS=glass,wine ADBENCH_SEEDS=0. The cache is
$ADBENCH_JSON (JSON lines), or a file in a temporary folder.
"""

import os
import tempfile
from pathlib import Path

import pytest

from benchmarks import adbench_leave_sets_out as lso
from benchmarks import adbench_protocol as protocol


@pytest.mark.skipif(not protocol.DATA_DIR.is_dir(), reason=f"no ADBench development data at {protocol.DATA_DIR}")
def test_adbench_leave_sets_out():
    sets, seeds, _, _ = protocol.selection({})
    assert sets, "ADBENCH_SETS selected nothing"
    path = Path(os.environ.get("ADBENCH_JSON") or Path(tempfile.mkdtemp(prefix="adbench-")) / "leave_sets_out.jsonl")
    cache = lso.Cache(path)
    lso.run(cache, sets, seeds)
    print(f"\n{len(sets)} sets x seeds {seeds}; cache {path}")
    print(lso.report(cache))
    aurocs = [r["auroc"] for r in cache.records.values() if "auroc" in r]
    assert aurocs and all(0.0 <= a <= 1.0 for a in aurocs)  # every fitted method scored the test rows
