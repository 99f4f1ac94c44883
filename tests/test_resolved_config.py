"""A run stores its configuration as asked and as resolved (issue 24: config.yaml held lr, pretrain,
selection_rule and cnn_width as null, not what the recipe made of them); what reads it back checks
that the same fields still resolve the same way."""

import pytest
import yaml

from dlmsvdd.cli import main
from dlmsvdd.training import checkpoints, config
from dlmsvdd.training.config import TrainConfig

# the scratch recipe as the user guide states it (docs/user-guide/detector.md, Recipes: lr 1e-3, BatchNorm
# statistics first, the latest epoch, 4 branches of a 32-wide small CNN)
SCRATCH = {"recipe": "scratch", "lr": 1e-3, "pretrain": "batchnorm", "selection_rule": "latest", "cnn_width": 32,
           "cnn_branches": 4}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resolved") / "run"
    assert main(["train", "--epochs", "0", "--verbose", "0", "--output", str(folder)]) == 0
    return folder


def test_config_yaml_holds_the_fields_as_asked_and_resolved(run):
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert {k: saved[k] for k in SCRATCH} == {**dict.fromkeys(SCRATCH), "recipe": "auto"}
    assert {k: saved["resolved"][k] for k in SCRATCH} == SCRATCH
    assert saved["resolved"]["epochs"] == 0 and saved["resolved"]["data"] == "digits"
    # train --config reads the fields: the recipe keeps choosing what was left to it
    cfg = TrainConfig.from_yaml(run / "config.yaml")
    assert cfg.to_dict() == {k: v for k, v in saved.items() if k != "resolved"}
    assert cfg.resolved() == saved["resolved"]


def test_another_backbone_resolves_no_small_cnn_shape():
    resolved = TrainConfig(weights="imagenet").validate().resolved()
    assert (resolved["backbone"], resolved["recipe"], resolved["lr"]) == ("resnet50", "paper", 1e-4)
    assert resolved["cnn_width"] is None and resolved["cnn_branches"] is None


def test_a_config_yaml_that_would_not_repeat_its_run_is_refused(run, tmp_path, monkeypatch):
    saved = yaml.safe_load((run / "config.yaml").read_text())
    path = tmp_path / "config.yaml"
    # the section edited, as if it set lr: refused, since it is not read
    path.write_text(yaml.safe_dump({**saved, "resolved": {**saved["resolved"], "lr": 0.01}}))
    with pytest.raises(ValueError, match=r"lr: 0.001, the section 0.01\).*set those fields themselves"):
        TrainConfig.from_yaml(path)
    # the recipe changed since the run (an upgrade): the file would train with another lr
    path.write_text(yaml.safe_dump(saved))
    monkeypatch.setitem(config.RECIPES, "scratch", {**config.RECIPES["scratch"], "lr": 5e-4})
    with pytest.raises(ValueError, match=r"lr: 0.0005, the section 0.001\)"):
        TrainConfig.from_yaml(path)
    monkeypatch.undo()
    # a new configuration made from the file (a field set to another value) is the user's: read as it says
    for change in ({"epochs": 3}, {"lr": 0.01}, {"weights": "imagenet"}, {"output": "elsewhere", "verbose": 2}):
        path.write_text(yaml.safe_dump({**saved, **change}))
        cfg = TrainConfig.from_yaml(path)
        assert all(getattr(cfg, k) == v for k, v in change.items())
    path.write_text(yaml.safe_dump({**saved, "resolved": [1]}))
    with pytest.raises(ValueError, match="'resolved' must be the mapping"):
        TrainConfig.from_yaml(path)


def test_resume_refuses_a_training_state_whose_fields_resolved_otherwise():
    cfg = TrainConfig().validate()
    state = {"config": cfg.to_dict(), "resolved": {**cfg.resolved(), "lr": 5e-4}}  # a recipe that changed since
    with pytest.raises(ValueError, match=r"another configuration \(as resolved: lr: 0.0005 there, 0.001 here\)"):
        checkpoints.check_config(state, cfg.to_dict(), "state.pt", cfg.resolved())
    checkpoints.check_config({"config": cfg.to_dict()}, cfg.to_dict(), "state.pt", cfg.resolved())  # before 'resolved'
    checkpoints.check_config({**state, "resolved": cfg.resolved()}, cfg.to_dict(), "state.pt", cfg.resolved())
