"""Issue 38, goal 3's lead: score ensembles without labels, on validation rows held out of each
unsupervised task's training rows (``unsupervised_ensembles``): each member's and ensemble's mean
validation AUROC per family, and the best ensemble's average rank among the single detectors.

    OMP_NUM_THREADS=1 pytest tests/benchmarks/test_bench_unsupervised_ensembles.py -o addopts="" -s

Needs ../shared/data/adbench-dev (skipped without it).
"""

import numpy as np
import pytest

from benchmarks import adbench_protocol as protocol
from benchmarks import unsupervised_ensembles as study


@pytest.mark.skipif(not protocol.DATA_DIR.is_dir(), reason=f"no ADBench development data at {protocol.DATA_DIR}")
def test_unsupervised_ensembles(benchmark):
    sets, seeds, _, _ = protocol.selection({})
    records = study.run(sets, seeds, log=None)
    keys = [k for k in records[0] if k not in ("set", "seed", "family")]
    families = sorted({r["family"] for r in records})
    means = {k: np.mean([r[k] for r in records]) for k in keys}
    print(f"\n{len(sets)} sets x seeds {seeds}, no labels, validation rows; mean AUROC (all, "
          + ", ".join(families) + ")")
    for k in sorted(keys, key=means.get, reverse=True):
        fam = ", ".join(f"{np.mean([r[k] for r in records if r['family'] == f]):.4f}" for f in families)
        print(f"  {k:40s} {means[k]:.4f} ({fam})")
    best = max((k for k in keys if " + " in k), key=means.get)
    for candidate in (best, "LpSVDD + kNN + LOF + DLMSVDD"):
        ranks = study.ensemble_ranks(records, candidate)
        print(f"ranks with {candidate}: " + ", ".join(f"{m} {v['rank']:.2f}" for m, v in ranks.items()))
    benchmark.extra_info.update({k: float(v) for k, v in means.items()})
    assert all(0.0 <= v <= 1.0 for v in means.values())
    benchmark.pedantic(lambda: None, rounds=1)
