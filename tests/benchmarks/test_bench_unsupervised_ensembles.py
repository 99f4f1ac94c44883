"""Issue 38, goal 3: how ``Consensus`` was chosen. Score ensembles without labels, on validation rows
held out of each unsupervised task's training rows (``unsupervised_ensembles``): each detector's and
ensemble's mean validation AUROC per family, and the ensembles whose average rank among the seven
peers beats the best peer's.

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
    print("ensembles whose average rank beats every peer's (with the best peer's):")
    for candidate in sorted((k for k in keys if " + " in k), key=means.get, reverse=True):
        ranks = study.ensemble_ranks(records, candidate)
        best_peer = min((m for m in ranks if m != candidate), key=lambda m: ranks[m]["rank"])
        if ranks[candidate]["rank"] < ranks[best_peer]["rank"]:
            print(f"  {candidate}: mean {means[candidate]:.4f}, rank {ranks[candidate]['rank']:.2f} "
                  f"against {best_peer} {ranks[best_peer]['rank']:.2f}")
    benchmark.extra_info.update({k: float(v) for k, v in means.items()})
    assert all(0.0 <= v <= 1.0 for v in means.values())
    benchmark.pedantic(lambda: None, rounds=1)
