"""Preset sweeps (the paper's experiments and ablations), overrides, and the report of
a finished sweep, end to end on digits with the small CNN."""

import csv
import json

import pytest
import yaml

from dlmsvdd import TrainConfig
from dlmsvdd.experiments import presets, tables
from dlmsvdd.cli import main
from dlmsvdd.experiments.sweep_report import write_report

TINY = {"epochs": 1, "seed": [0]}


def test_every_preset_loads_at_paper_and_digits_size():
    assert presets.names() == ["ablation-bandwidth", "ablation-frozen", "approx", "imagenet-lt", "long-tailed",
                               "long-tailed-scratch", "ratio", "ratio-cifar10-scratch", "ratio-fashion-mnist-scratch"]
    sizes = {"ratio": 3 * 10 * 10, "long-tailed": 3 * 10 * 10, "approx": 10 * (1 + 7 * 7),
             "ablation-frozen": 2 * 3 * 10 * 10, "ablation-bandwidth": 5 * 10 * 3, "imagenet-lt": 1000,
             "ratio-fashion-mnist-scratch": 3 * 10 * 10, "ratio-cifar10-scratch": 3 * 10 * 10,
             "long-tailed-scratch": 3 * 10 * 10}
    for name, size in sizes.items():
        preset = presets.load(name)
        assert len(preset.tasks()) == size and preset.description
        small = presets.load(name, digits=True)
        assert all(values["data"] == "digits" and values["backbone"] == "small_cnn" for _, values in small.tasks())
    approx = presets.load("approx", digits=True)
    budgets = {values.get("n_components") for _, values in approx.tasks() if values["kernel"] != "exact"}
    assert budgets == {32, 128, 512}
    assert sum(values["kernel"] == "exact" for _, values in approx.tasks()) == 10  # once per class, not per m


def test_digits_presets_train_the_default_a_user_gets_from_scratch():
    """Issue 16: the --digits presets run DLM-SVDD as the demo and the benchmark table
    measure it, TrainConfig(backbone="small_cnn", weights=None) with every training field
    at its default. Before: DIGITS set 10 epochs (and long-tailed kept the paper's 500 had
    it not), a configuration the table never measured. approx's digits section shortens
    its kernel study to 5 epochs on purpose (docs/user-guide/sweeps.md, Experiments)."""
    default = TrainConfig(backbone="small_cnn", weights=None)
    training = ("epochs", "batch_size", "weight_decay")  # the axes a preset varies (frozen, gamma, ...) aside
    for name in presets.names():
        for _, values in presets.load(name, digits=True).tasks():
            config = TrainConfig(**values)
            mine, theirs = config.training_params(), default.training_params()
            if name == "approx":  # its digits section shortens the epochs on purpose
                mine.pop("epochs"), theirs.pop("epochs")
            assert mine == theirs, name
            if name != "approx":
                assert {k: getattr(config, k) for k in training} == {k: getattr(default, k) for k in training}, name


def test_overrides_set_axes_where_they_are_and_single_values_in_base():
    preset = presets.load("approx", overrides={"n_components": [16, 32], "normal_class": 3, "seed": [0, 1],
                                               "lr": 0.01})
    assert preset.parts[1]["n_components"] == [16, 32] and "n_components" not in preset.grid
    assert preset.base["normal_class"] == 3 and "normal_class" not in preset.grid
    assert preset.grid["seed"] == [0, 1] and preset.base["lr"] == 0.01
    assert len(preset.tasks()) == 2 * (1 + 7 * 2)
    new_axis = presets.load("ratio", overrides={"frozen": [False, True]})
    assert new_axis.grid["frozen"] == [False, True]


def test_range_axes():
    imagenet = presets.load("imagenet-lt")
    assert [values["normal_class"] for _, values in imagenet.tasks()] == list(range(1000))
    assert all(values["data"] == "imagenet_lt" and values["ratio"] is None for _, values in imagenet.tasks())
    assert presets.load("imagenet-lt", digits=True).grid["normal_class"] == list(range(10))
    assert presets.load("ratio", overrides={"seed": {"range": [2, 8, 3]}}).grid["seed"] == [2, 5]
    with pytest.raises(ValueError, match="range takes"):
        presets.load("ratio", overrides={"seed": {"range": "0-9"}})


def test_parse_assignment_reads_yaml_values():
    assert presets.parse_assignment("epochs=5") == ("epochs", 5)
    assert presets.parse_assignment("normal-class=[0, 1]") == ("normal_class", [0, 1])
    assert presets.parse_assignment("weights=null") == ("weights", None)
    assert presets.parse_assignment("gamma=per-epoch") == ("gamma", "per-epoch")
    with pytest.raises(ValueError, match="key=value"):
        presets.parse_assignment("epochs")


def test_bad_presets_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'tabel2'"):
        presets.load("tabel2")
    with pytest.raises(ValueError, match="unknown configuration keys"):
        presets.load("ratio", overrides={"learning_rate": 0.1})
    clash = tmp_path / "clash.yaml"
    clash.write_text(yaml.safe_dump({"base": {}, "grid": {"seed": [0]}, "parts": [{"frozen": [True]},
                                                                                  {"frozen": [True, False]}]}))
    with pytest.raises(ValueError, match="same task"):
        presets.load(str(clash))
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"base": {}, "grids": {}}))
    with pytest.raises(ValueError, match="expected a mapping with sections"):
        presets.load(str(extra))


def test_ratio_preset_on_digits_and_its_report(tmp_path):
    preset = presets.load("ratio", digits=True, overrides={**TINY, "normal_class": [0, 1], "ratio": [0.1, 0.5]})
    records = preset.run(tmp_path, progress=False)
    assert [r["status"] for r in records] == ["done"] * 4
    assert yaml.safe_load((tmp_path / "preset.yaml").read_text())["name"] == "ratio"
    written = {p.name for p in write_report(tmp_path)}
    assert {"runs.csv", "auroc_digits.csv", "auroc_digits.md", "report.md"} <= written
    assert not written & {"long_tailed.md", "approx_study.png"}
    auroc = {(r["config"]["normal_class"], r["config"]["ratio"]): r["test"]["auroc"] for r in records}
    rows = {row["class"]: row for row in csv.DictReader((tmp_path / "auroc_digits.csv").open())}
    for ratio in (0.1, 0.5):
        assert float(rows["0"][f"ratio={ratio} mean"]) == pytest.approx(auroc[0, ratio], rel=1e-12)
        assert float(rows["mean"][f"ratio={ratio} mean"]) == pytest.approx((auroc[0, ratio] + auroc[1, ratio]) / 2)
    for r in records:  # the run's result carries the alpha-step's measurements
        assert r["alpha_step"]["peak_bytes"] > 0 and r["timing"]["mean_seconds_build"] > 0


def test_approx_sweep_and_report_from_the_command_line(tmp_path, capsys):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({"description": "tiny study",
                                    "base": {"data": "cifar10", "ratio": 0.1, "normal_class": 4},
                                    "grid": {"seed": [0]},
                                    "parts": [{"kernel": ["exact"]},
                                              {"kernel": ["rff", "nystrom"], "n_components": [16, 32]}],
                                    "digits": {"epochs": 1}}))
    out = tmp_path / "sweep"
    assert main(["presets", str(spec), "--digits"]) == 0
    assert "# 5 tasks" in capsys.readouterr().out
    assert main(["sweep", "--preset", str(spec), "--digits", "--output", str(out), "--verbose", "0"]) == 0
    assert "5 done, 0 failed" in capsys.readouterr().out
    assert main(["report", str(out), "--output", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert "every kernel and budget" in printed and "Pareto-efficient points" in printed
    points = list(csv.DictReader((tmp_path / "report" / "approx_study.csv").open()))
    assert [(p["kernel"], p["m"]) for p in points] == [("exact", ""), ("nystrom", "16"), ("nystrom", "32"),
                                                        ("rff", "16"), ("rff", "32")]
    records = {(r["config"]["kernel"], r["config"]["n_components"]): r for r in tables.load_records(out)}
    rff = records["rff", 32]
    assert float(points[4]["auroc_mean"]) == pytest.approx(rff["test"]["auroc"])
    assert float(points[4]["peak_mb_mean"]) == pytest.approx(rff["alpha_step"]["peak_bytes"] / 2**20)
    assert (tmp_path / "report" / "approx_study.png").stat().st_size > 10_000
    exact = json.loads((out / "seed=0,kernel=exact" / "result.json").read_text())
    assert exact["alpha_step"]["full_kernel_bytes"] == rff["alpha_step"]["n_train"] ** 2 * 4


def test_command_line_refuses_ambiguous_sweeps(tmp_path, capsys):
    assert main(["sweep", "--output", str(tmp_path)]) == 2
    assert "give a grid file or --preset" in capsys.readouterr().err
    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({"base": {}, "grid": {"seed": [0]}}))
    assert main(["sweep", str(grid), "--digits", "--output", str(tmp_path)]) == 2
    assert "--digits applies to presets" in capsys.readouterr().err
    assert main(["sweep", "--preset", "nope", "--output", str(tmp_path)]) == 2
    assert "unknown preset" in capsys.readouterr().err
    assert main(["presets"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in presets.names())
    assert main(["report", str(tmp_path)]) == 2
    assert "no finished tasks" in capsys.readouterr().err


@pytest.mark.parametrize("name, data", [("ratio-fashion-mnist-scratch", "fashion_mnist"),
                                        ("ratio-cifar10-scratch", "cifar10"), ("long-tailed-scratch", "cifar10")])
def test_scratch_presets_run_the_papers_protocol_at_the_defaults_on_the_fetch_scripts_files(tmp_path, name, data):
    """Issue 50: the paper's protocol without pretrained weights, the small CNN at every training
    default, on the data set's array file as the fetch script writes it (tiny here)."""
    import numpy as np

    default = TrainConfig(data=data, weights=None).training_params()
    preset = presets.load(name)
    assert all(TrainConfig(**values).training_params() == default for _, values in preset.tasks())
    shape = (28, 28) if data == "fashion_mnist" else (32, 32, 3)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / f"{data}.npz", X_train=rng.integers(0, 256, (200, *shape), dtype=np.uint8),
             y_train=np.arange(200) % 10, X_test=rng.integers(0, 256, (40, *shape), dtype=np.uint8),
             y_test=np.arange(40) % 10)
    small = presets.load(name, overrides={"root": str(tmp_path), "epochs": 1, "batch_size": 16, "seed": [0],
                                          "normal_class": [0], **({"rho": [2]} if "long" in name else {"ratio": [0.5]})})
    records = small.run(tmp_path / "sweep", progress=False)
    assert [r["status"] for r in records] == ["done"]
