"""Sweep tables from hand-made records, against plain loops and hand-computed values."""

import csv
import io
import json

import numpy as np
import pytest

from dlmsvdd.experiments import tables
from dlmsvdd.training.config import TrainConfig


def record(cls, seed, auroc=0.9, bacc=0.8, n_class=100, **config):
    """What a sweep task leaves in result.json (the parts the tables read)."""
    cfg = TrainConfig(**{"data": "digits", "normal_class": cls, "seed": seed, **config}).to_dict()
    n_val = n_class // 5
    return {"name": f"c{cls}-s{seed}-{config}", "status": "done", "config": cfg,
            "test": {"auroc": auroc, "balanced_accuracy": bacc, "threshold": 1.0},
            "val": {"auroc": auroc, "balanced_accuracy": bacc},
            "task_summary": {"normal_class": cls, "class_name": f"class{cls}", "train_normal": n_class - n_val,
                     "val_normal": n_val, "train_anomalous": 10, "val_anomalous": 2},
            "timing": {"mean_seconds_build": 0.1, "mean_seconds_solve": 0.2, "mean_seconds_omega": 1.0},
            "alpha_step": {"peak_bytes": 2**20}}


def value(cls, seed, ratio, frozen):
    """A distinct AUROC per run, so every mean below is checkable."""
    return 0.5 + 0.01 * cls + 0.003 * seed + 0.1 * ratio + (0.05 if frozen else 0)


def test_method_keys_are_the_varying_fields_other_than_task_axes():
    records = [record(c, s, ratio=r, frozen=f, epochs=5) for c in (0, 1) for s in (0, 1) for r in (0.1, 0.5)
               for f in (False, True)]
    assert tables.method_keys(records) == ["frozen"]
    assert tables.method_label(records[1]["config"], ["frozen"]) == "frozen=True"
    assert tables.method_label(records[0]["config"], []) == "DLM-SVDD"
    assert tables.method_label(record(0, 0, kernel="exact", n_components=64)["config"],
                               ["kernel", "n_components"]) == "exact"
    assert tables.method_label(record(0, 0, kernel="rff", n_components=64)["config"],
                               ["kernel", "n_components"]) == "rff, m=64"


def test_one_vs_rest_table_against_a_loop():
    classes, seeds, ratios = (0, 1, 2), (0, 1, 2), (0.1, 0.75)
    records = [record(c, s, auroc=value(c, s, r, f), ratio=r, frozen=f)
               for c in classes for s in seeds for r in ratios for f in (False, True)]
    records = [r for r in records if not (r["config"]["normal_class"] == 2 and r["config"]["seed"] == 2)]  # a gap
    table = tables.one_vs_rest_table(records)
    assert table.rows == ["class0", "class1", "class2", "mean"]
    assert table.columns == ["ratio=0.1 / frozen=False", "ratio=0.1 / frozen=True",
                             "ratio=0.75 / frozen=False", "ratio=0.75 / frozen=True"]
    for r in ratios:
        for f in (False, True):
            column = f"ratio={r} / frozen={f}"
            for c in classes:
                runs = [value(c, s, r, f) for s in seeds if not (c == 2 and s == 2)]
                cell = table.cells[f"class{c}", column]
                assert (cell.mean, cell.std, cell.n) == pytest.approx((np.mean(runs), np.std(runs), len(runs)),
                                                                      rel=1e-12)
            # the mean row: per seed, the mean over classes; only seeds with every class (seed 2 lacks class 2)
            per_seed = []
            for s in (0, 1):
                total = 0.0
                for c in classes:
                    total += value(c, s, r, f)
                per_seed.append(total / 3)
            cell = table.cells["mean", column]
            assert (cell.mean, cell.std, cell.n) == pytest.approx((np.mean(per_seed), np.std(per_seed), 2), rel=1e-12)


def test_markdown_and_csv_layouts():
    records = [record(0, 0, auroc=0.9), record(0, 1, auroc=0.8), record(1, 0, auroc=0.7), record(1, 1, auroc=0.6)]
    table = tables.one_vs_rest_table(records)
    lines = table.markdown().splitlines()
    assert lines[2:] == ["| class | ratio=0.1 |", "|---|---|", "| class0 | 0.850 ± 0.050 |",
                         "| class1 | 0.650 ± 0.050 |", "| mean | 0.750 ± 0.050 |"]
    rows = list(csv.reader(io.StringIO(table.csv())))
    assert rows[0] == ["class", "ratio=0.1 mean", "ratio=0.1 std", "ratio=0.1 n"]
    assert rows[3][0] == "mean" and [float(x) for x in rows[3][1:]] == pytest.approx([0.75, 0.05, 2])


def test_one_vs_rest_refuses_runs_it_cannot_tell_apart():
    twins = [record(0, 0, auroc=0.9), record(0, 0, auroc=0.8)]
    with pytest.raises(ValueError, match="two runs share class 0, seed 0"):
        tables.one_vs_rest_table(twins, keys=[])
    with pytest.raises(ValueError, match="no one-vs-rest runs"):
        tables.one_vs_rest_table([record(0, 0, rho=10, ratio=None)])


def test_shot_groups_follow_imagenet_lt():
    assert [tables.shot_group(n) for n in (1000, 101, 100, 20, 19, 0)] == ["many", "many", "medium", "medium",
                                                                          "few", "few"]
    assert tables.class_train_count(record(0, 0, n_class=55)) == 55  # train + validation of the normal class


def test_long_tailed_table_against_hand_computed_means():
    records = []
    for rho, offset in ((10, 0.0), (100, -0.2)):
        for c in (0, 1):
            for s in (0, 1):
                records.append(record(c, s, bacc=0.8 + offset + 0.1 * c + 0.02 * s, ratio=None, rho=rho,
                                      frozen=False))
                records.append(record(c, s, bacc=0.5 + offset, ratio=None, rho=rho, frozen=True))
    # ImageNet-LT: class 0 many-shot (200 images), 1 medium (50), 2 and 3 few (10); one seed
    counts, baccs = {0: 200, 1: 50, 2: 10, 3: 10}, {0: 0.9, 1: 0.7, 2: 0.4, 3: 0.2}
    for c in counts:
        records.append(record(c, 0, bacc=baccs[c], n_class=counts[c], data="imagenet_lt", root="x", ratio=None,
                              frozen=False))
    table = tables.long_tailed_table(records)
    assert table.rows == ["frozen=False", "frozen=True"]
    assert table.columns == ["digits rho=100", "digits rho=10", "imagenet_lt many", "imagenet_lt medium",
                             "imagenet_lt few", "imagenet_lt all"]
    # joint, rho = 10: seed 0 -> (0.80 + 0.90) / 2 = 0.85, seed 1 -> 0.87
    cell = table.cells["frozen=False", "digits rho=10"]
    assert (cell.mean, cell.std) == pytest.approx((0.86, 0.01), rel=1e-12)
    assert table.cells["frozen=True", "digits rho=100"].mean == pytest.approx(0.3, rel=1e-12)
    expected = {"many": 0.9, "medium": 0.7, "few": 0.3, "all": (0.9 + 0.7 + 0.4 + 0.2) / 4}
    for group, mean in expected.items():
        assert table.cells["frozen=False", f"imagenet_lt {group}"].mean == pytest.approx(mean, rel=1e-12)
    assert ("frozen=True", "imagenet_lt all") not in table.cells
    assert "| frozen=False | 66.00 ± 1.00 | 86.00 ± 1.00 | 90.00 ± 0.00 |" in table.markdown()  # percent


def test_load_records_names_them_by_folder(tmp_path):
    with pytest.raises(ValueError, match="no finished tasks"):
        tables.load_records(tmp_path)
    for name, auroc in (("b", 0.7), ("a", 0.9)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(record(0, 0, auroc=auroc)))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "failed.json").write_text("{}")
    loaded = tables.load_records(tmp_path)
    assert [(r["name"], r["test"]["auroc"]) for r in loaded] == [("a", 0.9), ("b", 0.7)]
    rows = list(csv.DictReader(io.StringIO(tables.runs_csv(loaded))))
    assert rows[0]["name"] == "a" and float(rows[0]["test_auroc"]) == 0.9 and float(rows[0]["alpha_peak_mb"]) == 1.0


def test_method_comparison_is_friedman_on_complete_blocks_and_handles_gaps():
    from scipy.stats import friedmanchisquare

    classes, seeds, ratios = (0, 1, 2, 3), (0, 1), (0.1, 0.5)
    rng = np.random.default_rng(0)
    auroc = {(c, s, r, f): float(rng.uniform(0.8, 1.0)) for c in classes for s in seeds for r in ratios
             for f in (False, True, None)}
    records = [record(c, s, auroc=auroc[c, s, r, f], ratio=r, frozen=bool(f), epochs=5 if f is None else 30)
               for c in classes for s in seeds for r in ratios for f in (False, True, None)]
    text = tables.method_comparison(records)
    blocks = [(c, r) for c in classes for r in ratios]
    columns = [[np.mean([auroc[c, s, r, f] for s in seeds]) for c, r in blocks] for f in (False, True, None)]
    statistic, p_value = friedmanchisquare(*columns)
    assert f"statistic {statistic:.3f}, df 2, p = {p_value:.3g}" in text
    assert "(8 blocks used" in text
    # one method never run on class 0: those blocks have a missing entry, the test still runs
    partial = [r for r in records if not (r["config"]["normal_class"] == 0 and r["config"]["frozen"])]
    assert "(8 blocks used" in tables.method_comparison(partial)
    assert tables.method_comparison([r for r in records if not r["config"]["frozen"] and
                                     r["config"]["epochs"] == 30]) is None  # one method
