"""Issue 46: the realised false-alarm shares of new normal rows at contamination 0.1, fpr 0.05 and
fdr 0.1 against their targets, with the power beside them (``benchmarks.calibration_study``; the
tables of docs/results/calibration.md).

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_calibration.py -o addopts="" -s

The data-set part reads ../shared/data/adbench-dev, or the folder CALIBRATION_DATA names (any
``*.npz`` with ``X`` and ``y``, 1 = anomaly): the rates are meant to be checked on sets not used here.
"""

import os
from pathlib import Path

import pytest

from benchmarks import calibration_study as study


def _check(records):
    for r in records:
        for key in ("default_false", "fpr_false"):
            assert r[key] is None or 0 <= r[key] <= r["n_new"]
        assert 0.0 <= r["auroc"] <= 1.0


@pytest.mark.parametrize("part", ["synthetic", "kernels"])
def test_synthetic_rates(part):
    records = getattr(study, part)(log=None)
    _check(records)
    print(f"\n{part}\n" + study.tables(records))


DATA = Path(os.environ.get("CALIBRATION_DATA", study.DEV_SETS))


@pytest.mark.skipif(not DATA.is_dir(), reason=f"no data sets at {DATA}")
def test_rates_on_held_out_normals_of_data_sets():
    records = study.sets(DATA, log=None)
    _check(records)
    print(f"\n{DATA}\n" + study.tables(records))
