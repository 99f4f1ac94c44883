"""A new user's first steps: train with no flags, --version, --help with
defaults, the source-tree import, history.csv and TensorBoard."""

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import dlmsvdd
import dlmsvdd_ext
from dlmsvdd.cli import main


@pytest.mark.slow
def test_train_with_no_flags_trains_the_small_cnn_on_digits(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train"]) == 0
    assert "test AUROC" in capsys.readouterr().out
    (run,) = (tmp_path / "runs").iterdir()
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert (config["data"], config["backbone"], config["weights"]) == ("digits", "auto", None)
    assert config["resolved"]["backbone"] == "small_cnn"  # "auto", resolved for images
    assert json.loads((run / "metrics.json").read_text())["test"]["auroc"] > 0.5


def test_the_papers_network_is_one_flag_away():
    from dlmsvdd.cli import _config, build_parser

    cfg = _config(build_parser().parse_args(["train", "--weights", "imagenet"]))
    assert (cfg.resolved_backbone(), cfg.weights) == ("resnet50", "imagenet")
    assert _config(build_parser().parse_args(["train"])).resolved_backbone() == "small_cnn"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"dlmsvdd {dlmsvdd.__version__}"


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    # one entry per option (argparse starts each on a line of its own and wraps the help)
    options = {" ".join(block.split()).split(" ", 1)[0]: " ".join(block.split())
               for block in re.split(r"\n  (?=-)", capsys.readouterr().out)}
    for flag, default in (("--epochs", "the recipe's, 30; 15 for the MLP from scratch; from scratch on images on the CPU "
                                       "fewer on huge training sets, see --budget-rows"), ("--lr", "the recipe's"), ("--recipe", "auto"), ("--backbone", "auto"),
                          ("--data", "digits"),
                          ("--nu", "auto"), ("--batch-size", "128"), ("--n-components", "1024")):
        assert options[flag].endswith(f"(default: {default})"), options[flag]
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "(default: local)" in " ".join(capsys.readouterr().out.split())


def test_importing_the_source_tree_without_a_build_says_why_in_one_line(tmp_path):
    package = tmp_path / "dlmsvdd_ext"
    shutil.copytree(Path(dlmsvdd_ext.__file__).parent, package,
                    ignore=shutil.ignore_patterns("_C.*", "__pycache__"))
    done = subprocess.run([sys.executable, "-c", "import dlmsvdd_ext"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: dlmsvdd_ext's compiled module _C is not built in")
    assert "pip install ." in last and "partially initialized" not in done.stderr


def test_history_csv_and_tensorboard(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator  # the test extra installs it

    run = tmp_path / "run"
    assert main(["train", "--epochs", "2", "--lr", "1e-3", "--ratio", "0.5", "--tensorboard", "--verbose", "0",
                 "--output", str(run)]) == 0
    history = json.loads((run / "history.json").read_text())
    with open(run / "history.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    numbers = {}  # every number of history.json, in order of first appearance
    for epoch in history:
        numbers.update({k: None for k, v in epoch.items() if isinstance(v, (int, float))})
    assert list(rows[0]) == list(numbers)
    assert {"epoch", "gamma", "objective", "gap", "n_iter", "b_normal", "b_anomaly", "seconds_build",
            "seconds_solve", "seconds_features", "seconds_alpha", "val_auroc", "omega_loss"} <= set(rows[0])
    for row, epoch in zip(rows, history):
        assert float(row["val_auroc"]) == epoch["val_auroc"] and int(row["n_iter"]) == epoch["n_iter"]
    assert rows[-1]["omega_loss"] == ""  # the last epoch has no omega-step

    events = event_accumulator.EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    logged = events.Scalars("val_auroc")
    assert [e.step for e in logged] == [0, 1, 2]
    assert [e.value for e in logged] == pytest.approx([h["val_auroc"] for h in history], rel=1e-6)
    assert [e.step for e in events.Scalars("omega_loss")] == [0, 1]


def test_tensorboard_missing_is_said_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    assert main(["train", "--epochs", "1", "--tensorboard", "--verbose", "0", "--output", str(tmp_path / "r")]) == 2
    assert "--tensorboard needs the tensorboard package" in capsys.readouterr().err
    assert not (tmp_path / "r" / "model.pt").exists()
