"""The choice of LpSVDD's defaults with labelled anomalies (nu="auto", gamma="local") on the
ADBench development sets' validation rows (issue 28; ``adbench_selection``).

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_adbench_selection.py -o addopts="" -s

Needs ../shared/data/adbench-dev (skipped without it). Every task's test rows stay unseen.
"""

import json
import os
import time

import pytest

from dlmsvdd_ext import svdd

from benchmarks import adbench_protocol as protocol
from benchmarks import adbench_selection as selection


@pytest.mark.skipif(not protocol.DATA_DIR.is_dir(), reason=f"no ADBench development data at {protocol.DATA_DIR}")
def test_defaults_are_the_validation_choice():
    sets, seeds, las, _ = protocol.selection({})
    start = time.perf_counter()
    records = selection.run(sets, seeds, las)
    print(f"\n{len(sets)} sets x seeds {seeds} x la {las}; {time.perf_counter() - start:.0f} s; "
          "mean validation AUROC (held-out training rows):")
    print(selection.table(records))
    if os.environ.get("ADBENCH_JSON"):
        with open(os.environ["ADBENCH_JSON"], "w") as f:
            json.dump(records, f, indent=1)
    nu, scale = selection.chosen(records)
    print(f"chosen: nu = {nu:g}, scale = {scale:g}; defaults: nu = {svdd.NU_WITH_ANOMALIES:g}, "
          f"scale = {svdd.LOCAL_GAMMA_SCALE:g}")
    if len(sets) == len(protocol.available_sets()):  # the defaults are the choice on every set only
        assert (nu, scale) == (svdd.NU_WITH_ANOMALIES, svdd.LOCAL_GAMMA_SCALE)
