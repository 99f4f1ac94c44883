"""The kernel-approximation study: Pareto selection against a brute-force loop,
the per-backend points, the tables and the figure, from hand-made records."""

import numpy as np
import pytest

from dlmsvdd.experiments import approx_study
from dlmsvdd.training.config import TrainConfig


def brute_force(values, maximize):
    """Point i is efficient unless some j is at least as good everywhere and better somewhere."""
    keep = []
    for i, a in enumerate(values):
        dominated = False
        for j, b in enumerate(values):
            if j == i:
                continue
            no_worse = all((b[k] >= a[k]) if maximize[k] else (b[k] <= a[k]) for k in range(len(a)))
            better = any((b[k] > a[k]) if maximize[k] else (b[k] < a[k]) for k in range(len(a)))
            dominated = dominated or (no_worse and better)
        keep.append(not dominated)
    return keep


def test_pareto_by_hand():
    # (AUROC up, seconds down): b dominates d; a and c trade off; e equals a (neither dominates)
    points = [[0.9, 2.0], [0.95, 1.0], [0.99, 3.0], [0.9, 1.5], [0.9, 2.0]]
    assert approx_study.pareto_efficient(points, [True, False]).tolist() == [False, True, True, False, False]
    assert approx_study.pareto_efficient([[0.9, 2.0], [0.9, 2.0]], [True, False]).tolist() == [True, True]


@pytest.mark.parametrize("maximize", [[True, False, False], [False, False], [True, True, False, True]])
def test_pareto_against_brute_force(maximize):
    rng = np.random.default_rng(len(maximize))
    for trial in range(30):
        n = int(rng.integers(1, 25))
        values = rng.integers(0, 4, size=(n, len(maximize))).astype(float)  # small range: many ties
        assert approx_study.pareto_efficient(values, maximize).tolist() == brute_force(values.tolist(), maximize)


def test_pareto_refuses_bad_input():
    with pytest.raises(ValueError, match="finite"):
        approx_study.pareto_efficient([[1.0, np.nan]], [True, False])
    with pytest.raises(ValueError, match="objectives"):
        approx_study.pareto_efficient([[1.0, 2.0, 3.0]], [True, False])


# (backend, m): AUROC of class 0 and 1, build and solve seconds, peak MB, factor columns
RUNS = {("exact", None): ((0.99, 0.97), 0.5, 3.0, 40.0, None),
        ("nystrom", 32): ((0.98, 0.96), 0.1, 1.0, 2.0, 32),
        ("nystrom", 128): ((0.99, 0.97), 0.2, 1.5, 6.0, 120),
        ("rff", 32): ((0.90, 0.88), 0.1, 1.2, 2.5, 32),  # dominated by nystrom 32
        ("rff", 128): ((0.96, 0.94), 0.05, 0.5, 1.0, 128)}


def records():
    out = []
    for (backend, m), (aurocs, build, solve, peak, rank) in RUNS.items():
        for cls, auroc in enumerate(aurocs):
            cfg = TrainConfig(data="digits", kernel=backend, n_components=m or 1024, normal_class=cls).to_dict()
            out.append({"name": f"{backend}{m}c{cls}", "config": cfg, "test": {"auroc": auroc},
                        "timing": {"mean_seconds_build": build, "mean_seconds_solve": solve + 0.1 * cls},
                        "alpha_step": {"peak_bytes": int(peak * 2**20), "rank": rank,
                                       "full_kernel_bytes": 25 * 2**20}})
    return out


def test_points_summarise_each_backend_and_budget():
    pts = approx_study.points(records())
    assert [(p.kernel, p.m) for p in pts] == list(RUNS)
    nystrom = pts[2]
    assert (nystrom.auroc.mean, nystrom.auroc.std) == pytest.approx((0.98, 0.01))
    assert (nystrom.build.mean, nystrom.solve.mean, nystrom.fit.mean) == pytest.approx((0.2, 1.55, 1.75))
    assert nystrom.fit.std == pytest.approx(0.05) and nystrom.rank == 120
    assert pts[0].full_kernel_mb == 25.0 and pts[0].rank is None and pts[0].label == "exact"
    expected = brute_force([[p.auroc.mean, p.fit.mean, p.peak_mb.mean] for p in pts], [True, False, False])
    # the exact kernel ties nystrom m=128 in AUROC and is slower and larger: dominated
    assert [p.efficient for p in pts] == expected == [False, True, True, False, True]


def test_tables_and_figure(tmp_path):
    pts = approx_study.points(records())
    full = approx_study.markdown(pts, "study").splitlines()
    assert full[2].startswith("| kernel | m | Z columns | AUROC | build (s) | solve (s) | fit (s) | peak (MB)")
    assert full[4] == "| exact | – | – | 0.9800 ± 0.0100 | 0.5 | 3.05 | 3.55 | 40 |  |"
    assert full[6] == "| nystrom | 128 | 120 | 0.9800 ± 0.0100 | 0.2 | 1.55 | 1.75 | 6 | yes |"
    front = approx_study.pareto_markdown(pts, "front")
    # Table IV: the exact reference (even when dominated) and the efficient points
    assert "| rff | 32 |" not in front and "| rff | 128 |" in front and "| exact |" in front
    csv_lines = approx_study.csv(pts).splitlines()
    assert csv_lines[0].startswith("kernel,m,z_columns,n_runs,auroc_mean,auroc_std")
    assert len(csv_lines) == 1 + len(RUNS)
    path = tmp_path / "fig.png"
    approx_study.plot(pts, path, "a title")
    from PIL import Image

    with Image.open(path) as image:
        assert image.size[0] > 1000 and image.size[1] > 800


def test_records_without_measurements_are_refused():
    old = records()
    del old[3]["alpha_step"]
    with pytest.raises(ValueError, match="no alpha-step measurements"):
        approx_study.points(old)


def test_the_study_applies_when_only_backend_and_budget_vary():
    assert approx_study.applies(records())
    frozen = [dict(r, config={**r["config"], "frozen": i % 2 == 0}) for i, r in enumerate(records())]
    assert not approx_study.applies(frozen)
    assert not approx_study.applies([r for r in records() if r["config"]["kernel"] == "exact"])
