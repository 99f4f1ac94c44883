"""The command's answers to ordinary mistakes: `dlmsvdd <command>: error: ...`,
exit code 2, a hint where one exists, no traceback (unless --verbose 2), and
nothing left on disk by a start that failed."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from dlmsvdd.cli import main

SMALL = ["--backbone", "small_cnn", "--weights", "none", "--epochs", "1", "--verbose", "0"]


def _error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"dlmsvdd {command}: error: ") and "Traceback" not in err, err
    return err


@pytest.fixture
def no_gpu(monkeypatch):
    """This machine as one without a CUDA GPU, whatever it has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.fixture
def no_torchvision(monkeypatch):
    """torchvision as if it were not installed."""
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")] + ["torchvision"]:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run on digits (1 epoch)."""
    folder = tmp_path_factory.mktemp("cli") / "run"
    assert main(["train", *SMALL, "--output", str(folder)]) == 0
    return folder


@pytest.mark.parametrize("flags,message", [
    (["--config", "nope.yaml"], "configuration file 'nope.yaml' does not exist"),
    (["--lr", "inf"], "lr must be a positive number or None, got inf (not finite)"),
    (["--epochs", "two"], "epochs must be an integer >= 0 or None, got 'two'"),
    (["--device", "gpu"], "device must be 'auto' or a torch device such as 'cpu', 'cuda' or 'cuda:1', got 'gpu'"),
    (["--solver", "foo"], "solver must be one of ('apg', 'pairwise', 'paper'), got 'foo'"),
    (["--on-divergence", "ignore"], "on_divergence must be one of ('error', 'rollback')"),
    # issue 24: these ended in exit code 1 ("a bug?"), started a 37 GB allocation, or ran
    (["--image-size", "3"], "image_size 3 is too small for the small CNN: it takes images of 4 pixels and more"),
    (["--cnn-branches", "100000"], "cnn_width 32 with cnn_branches 100000 makes a small CNN of 9,347,200,000 "
                                   "parameters (37.4 GB of float32 weights); it takes at most 23,508,032"),
    (["--cnn-width", "100000", "--cnn-branches", "1"], "makes a small CNN of"),
    (["--verbose", "7"], "verbose must be an integer in [0, 2], got 7"),
    (["--seed", "99999999999999999999"], "seed must be an integer in [0, 4294967295] (a 32-bit seed, as numpy "
                                         "takes), got 99999999999999999999"),
    (["--config", "."], "configuration file '.' is a folder; give a YAML file"),
])
def test_bad_values_are_refused_before_anything_is_made(flags, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *SMALL, "--output", "run", *flags]) == 2
    assert message in _error(capsys, "train")
    assert list(tmp_path.iterdir()) == []


def test_malformed_yaml_is_refused(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("lr: [1e-3\n")
    assert main(["train", "--config", str(tmp_path / "bad.yaml")]) == 2
    assert "bad.yaml is not a valid YAML file" in _error(capsys, "train")


def test_yaml_and_set_read_1e_3_as_a_number(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e-3 as a string; it ended in TypeError: '>' not supported."""
    from dlmsvdd.experiments import presets
    from dlmsvdd.training.config import TrainConfig

    (tmp_path / "c.yaml").write_text("lr: 1e-3\nfw_tol: 1e-8\nepochs: 3\ngamma: 2e0\nratio: none\n")
    cfg = TrainConfig.from_yaml(tmp_path / "c.yaml")
    assert (cfg.lr, cfg.fw_tol, cfg.epochs, cfg.gamma, cfg.ratio) == (1e-3, 1e-8, 3, 2.0, None)
    assert presets.parse_assignment("lr=1e-3") == ("lr", 1e-3)
    assert presets.parse_assignment("fw_tol=[1e-8, 1e-6]") == ("fw_tol", [1e-8, 1e-6])
    assert presets.parse_assignment("gamma=median") == ("gamma", "median")
    (tmp_path / "c.yaml").write_text("epochs: two\n")
    with pytest.raises(ValueError, match="epochs must be an integer >= 0 or None, got 'two'"):
        TrainConfig.from_yaml(tmp_path / "c.yaml")


def test_every_field_is_checked_by_one_table():
    """The driver's fields in its table, the boundary's in LpSVDD's, none in both, none left out."""
    import dataclasses

    from dlmsvdd_ext import params

    from dlmsvdd.training.config import CONSTRAINTS, TrainConfig

    boundary = {TrainConfig.BOUNDARY_NAMES.get(k, k) for k in TrainConfig().boundary_params()}
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(CONSTRAINTS) | boundary == fields and not set(CONSTRAINTS) & boundary
    assert set(TrainConfig().boundary_params()) <= set(params.CONSTRAINTS)
    for name, bad in (("batch_size", 0), ("grad_clip", float("nan")), ("weight_decay", float("inf")),
                      ("val_fraction", 1.0), ("frozen", "yes"), ("seed", -1), ("num_workers", 1.5),
                      ("extra", []), ("root", 3), ("normal_class", True)):
        with pytest.raises(ValueError, match=f"^{name} must be"):
            TrainConfig(**{name: bad}).validate()


def test_a_misspelt_flag_shows_the_commands_usage(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["train", "--lrr", "3"])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.startswith("usage: dlmsvdd train") and "dlmsvdd train: error: unrecognized arguments: --lrr 3" in err


def test_verbose_2_shows_the_traceback(tmp_path):
    with pytest.raises(ValueError, match="device must be"):
        main(["train", *SMALL, "--device", "gpu", "--verbose", "2", "--output", str(tmp_path / "r")])


def test_cuda_without_a_gpu_hints_at_the_cpu(no_gpu, tmp_path, capsys):
    assert main(["train", *SMALL, "--device", "cuda", "--output", str(tmp_path / "r")]) == 2
    err = _error(capsys, "train")
    assert "device 'cuda' asked for" in err and "--device cpu" in err
    assert not (tmp_path / "r").exists()


def test_a_cuda_checkpoint_loads_on_a_cpu_machine(run, no_gpu, tmp_path, capsys):
    state = torch.load(run / "model.pt", weights_only=True)
    state["config"]["device"] = "cuda"  # as a run on a GPU machine saves it
    torch.save(state, tmp_path / "model.pt")
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "model.pt")]) == 0  # on the CPU, said in the log
    expected = json.loads((run / "metrics.json").read_text())["test"]["auroc"]
    assert json.loads(capsys.readouterr().out)["auroc"] == pytest.approx(expected, abs=1e-12)
    assert main(["score", str(tmp_path / "model.pt"), "--device", "cpu", "--output", str(tmp_path / "s.csv")]) == 0
    assert main(["evaluate", str(tmp_path / "model.pt"), "--device", "cuda"]) == 2
    assert "--device cpu" in _error(capsys, "evaluate")


@pytest.mark.parametrize("content,message", [
    (b"", "is empty (0 bytes)"),
    (b"hello, not a checkpoint\n", "is not a dlmsvdd checkpoint (torch.load"),
    ("plain", "is not a dlmsvdd checkpoint (a torch file without dlmsvdd's 'format')"),
    ("newer", "was written by a newer dlmsvdd (checkpoint format 99"),
    ("training", "is the training state of an unfinished run, not a model"),
])
def test_evaluate_says_what_is_wrong_with_the_file(content, message, run, tmp_path, capsys):
    path = tmp_path / "model.pt"
    if content == "plain":
        torch.save({"weights": torch.ones(2)}, path)
    elif content in ("newer", "training"):
        state = torch.load(run / "model.pt", weights_only=True)
        state.update(format=99) if content == "newer" else state.update(kind="training")
        torch.save(state, path)
    else:
        path.write_bytes(content)
    assert main(["evaluate", str(path)]) == 2
    assert message in _error(capsys, "evaluate")


def test_an_output_that_is_a_file_or_cannot_be_made_is_refused(tmp_path, capsys):
    (tmp_path / "taken").write_text("keep me")
    assert main(["train", *SMALL, "--output", str(tmp_path / "taken")]) == 2
    assert "exists and is not a folder" in _error(capsys, "train")
    assert (tmp_path / "taken").read_text() == "keep me"
    assert main(["train", *SMALL, "--output", str(tmp_path / "taken" / "run")]) == 2
    assert "cannot create the run folder" in _error(capsys, "train")
    assert main(["train", *SMALL, "--output", "/proc/dlmsvdd-run"]) == 2
    assert "cannot create the run folder" in _error(capsys, "train")


def test_score_refuses_an_output_it_cannot_write_before_scoring(run, tmp_path, capsys):
    assert main(["score", str(run), "--output", str(tmp_path)]) == 2
    assert "is a folder; give a file name" in _error(capsys, "score")
    assert main(["score", str(run), "--output", str(tmp_path / "missing" / "s.csv")]) == 2
    assert "does not exist" in _error(capsys, "score")


@pytest.mark.parametrize("shape", [(4, 3, 8, 8), (4, 1, 4, 4)])
def test_score_npy_refuses_images_the_model_does_not_take(shape, run, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros(shape, dtype=np.float32))
    assert main(["score", str(run), "--npy", str(tmp_path / "x.npy")]) == 2
    error = _error(capsys, "score")  # raw images, as the task's record takes them
    assert f"got images of shape {list(shape)}" in error and "the model expects grey images (N, 1, 8, 8)" in error


@pytest.mark.parametrize("flags", [["--backbone", "resnet18", "--weights", "none"],
                                   ["--data", "cifar10", "--root", "."]])
def test_no_torchvision_hints_at_the_vision_extra(flags, no_torchvision, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--epochs", "1", "--verbose", "0", "--output", "run", *flags]) == 2
    assert 'needs torchvision' in (err := _error(capsys, "train")) and 'pip install "dlmsvdd[vision]"' in err
    assert list(tmp_path.iterdir()) == []  # the backbone fails after the folder was made: it is removed


def test_a_failed_start_in_an_existing_folder_removes_only_what_it_wrote(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["train", "--backbone", "resnet18", "--weights", str(tmp_path / "missing.pth"), "--epochs", "1",
                 "--verbose", "0", "--output", str(folder)]) == 2
    assert "does not exist" in _error(capsys, "train")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]  # no config.yaml, no log.txt


def _first_weight(state):
    return next(k for k, v in state["network"].items() if v.is_floating_point())


# hand edits of a finished run's model.pt, and what loading it must say (before: exit 1 and "a bug?" for the
# first three, and NaN numbers loaded: evaluate said balanced accuracy 0.5, score called every image +1)
MODEL_EDITS = {
    "no network": (lambda s: s.pop("network"), "is not a complete dlmsvdd model: it lacks 'network'"),
    "no boundary": (lambda s: s.pop("boundary"), "is not a complete dlmsvdd model: it lacks 'boundary'"),
    "wrong shape": (lambda s: s["network"].update({_first_weight(s): torch.zeros(3)}),
                    "its network does not fit the backbone its configuration builds (size mismatch for "),
    "boundary shape": (lambda s: s["boundary"].update(support_vectors=s["boundary"]["support_vectors"][:, :5]),
                       "its boundary does not fit its network (Y has 5 features but X has "),
    "threshold nan": (lambda s: s.update(threshold=float("nan")), "its threshold is nan, not a finite number"),
    "threshold text": (lambda s: s.update(threshold="0.5"), "its threshold is '0.5', not a finite number"),
    "weight nan": (lambda s: s["network"][_first_weight(s)].view(-1).__setitem__(0, float("nan")),
                   "network['backbone."),
    "boundary inf": (lambda s: s["boundary"]["dual_coef"].__setitem__(0, float("inf")),
                     "boundary['dual_coef'] holds NaN or infinite values"),
    "config key": (lambda s: s["config"].update(colour="blue"), "its configuration is not one this dlmsvdd writes "
                                                                 "(colour)"),
    "no backbone": (lambda s: s["config"].pop("backbone"), "its configuration is not one this dlmsvdd writes "
                                                            "(no 'backbone')"),
    "gamma nan": (lambda s: s["boundary"]["scalars"].update(gamma_=float("nan")),
                  "boundary['scalars']['gamma_'] is nan, not a finite number"),
    "calibration nan": (lambda s: s["boundary"]["calibration"]["scores"].__setitem__(0, float("nan")),
                        "boundary['calibration']['scores'] holds NaN or infinite values"),
    "calibration text": (lambda s: s["boundary"].update(calibration="scores"),
                         "its boundary is not a complete LpSVDD state"),
}


@pytest.mark.parametrize("edit", list(MODEL_EDITS))
@pytest.mark.parametrize("command", ["evaluate", "score"])
def test_a_damaged_model_file_is_refused_when_loaded(edit, command, run, tmp_path, capsys):
    change, message = MODEL_EDITS[edit]
    state = torch.load(run / "model.pt", weights_only=True)
    change(state)
    torch.save(state, tmp_path / "model.pt")
    assert main([command, str(tmp_path / "model.pt")]) == 2
    err = _error(capsys, command)
    assert message in err and "a bug?" not in err


def test_a_file_holding_python_objects_is_refused_without_torchs_advice(run, tmp_path, capsys):
    """torch.load's error told the user to load with weights_only=False, which runs the file's code."""
    state = torch.load(run / "model.pt", weights_only=True)
    state["extra"] = np.arange(3)  # a numpy array pickles as numpy's reconstruct function
    torch.save(state, tmp_path / "model.pt")
    assert main(["evaluate", str(tmp_path / "model.pt")]) == 2
    err = _error(capsys, "evaluate")
    assert "is not a dlmsvdd checkpoint: it holds a Python object (numpy." in err
    assert "weights_only" not in err and "add_safe_globals" not in err


def test_the_small_cnns_bounds_are_the_networks_own():
    """The smallest image and the parameter count the configuration checks are the real network's."""
    import torchvision

    from dlmsvdd.training.config import SMALL_CNN_MAX_PARAMETERS, TrainConfig
    from dlmsvdd.training.models import SMALL_CNN_MIN_SIZE, SmallCNN, small_cnn_parameters

    net = SmallCNN(3, 8, 2).train()
    assert net(torch.zeros(2, 3, SMALL_CNN_MIN_SIZE, SMALL_CNN_MIN_SIZE)).shape == (2, 4 * 8 * 2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        net(torch.zeros(2, 3, SMALL_CNN_MIN_SIZE - 1, SMALL_CNN_MIN_SIZE - 1))
    TrainConfig(image_size=SMALL_CNN_MIN_SIZE).validate()
    for width, branches in ((32, 4), (5, 3), (64, 1)):
        assert small_cnn_parameters(width, branches) == sum(p.numel() for p in SmallCNN(3, width, branches).parameters())
    resnet50 = torchvision.models.resnet50(weights=None)
    assert SMALL_CNN_MAX_PARAMETERS == sum(p.numel() for n, p in resnet50.named_parameters() if not n.startswith("fc."))
    # at width 32 the bound is the last branch count whose network fits it
    largest = max(b for b in range(1, 400) if small_cnn_parameters(32, b) <= SMALL_CNN_MAX_PARAMETERS)
    TrainConfig(cnn_branches=largest).validate()
    with pytest.raises(ValueError, match=f"cnn_branches {largest + 1} makes a small CNN"):
        TrainConfig(cnn_branches=largest + 1).validate()
    TrainConfig(seed=2**32 - 1).validate()
    with pytest.raises(ValueError, match="seed must be"):
        TrainConfig(seed=2**32).validate()


@pytest.mark.parametrize("command", ["evaluate", "score", "sweep"])
def test_other_commands_refuse_a_verbose_level_they_do_not_have(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, "somewhere", "--verbose", "7"] + (["--output", "x"] if command == "sweep" else []))
    assert stop.value.code == 2
    assert f"dlmsvdd {command}: error: argument --verbose: invalid choice: 7 (choose from 0, 1, 2)" in \
        capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--split", "test"], ["--split", "val"], ["--root", "."]])
@pytest.mark.parametrize("given", ["--npy", "--images"])
def test_score_refuses_a_split_beside_the_images_it_would_ignore(flags, given, run, tmp_path, capsys):
    """--npy with --split test scored the file and ignored --split, silently."""
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 8, 8), dtype=np.float32))
    path = tmp_path / ("x.npy" if given == "--npy" else "")
    assert main(["score", str(run), given, str(path), *flags, "--output", str(tmp_path / "s.csv")]) == 2
    assert f"{given} scores the images given, {flags[0]} a split of the model's task: give one or the other" in \
        _error(capsys, "score")
    assert not (tmp_path / "s.csv").exists()
    assert main(["score", str(run), "--npy", str(tmp_path / "x.npy"), "--output", str(tmp_path / "s.csv")]) == 0


def _alias_bomb(levels: int = 9) -> str:
    """YAML whose every level repeats the one below it 9 times: 9**levels strings from a few lines."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join("  " + line for line in lines) + "\n"


@pytest.mark.parametrize("section", ["extra", "nope"])
def test_a_yaml_alias_bomb_is_refused_wherever_it_is(section, tmp_path):
    """Under extra it hung train (in to_dict's deep copy, 2.3 GB after 90 s); under an unknown key it was
    refused. Run as a process of its own, so that the old behaviour fails the test instead of hanging it."""
    config = tmp_path / "bomb.yaml"
    config.write_text(f"{section}:\n{_alias_bomb()}")
    # cwd outside the source tree, whose dlmsvdd_ext has no compiled module (an installed package's has)
    done = subprocess.run([sys.executable, "-m", "dlmsvdd", "train", "--config", str(config), "--output",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    expected = ("extra holds more than 65536 values and characters (repeated YAML aliases count each time they are "
                "used)" if section == "extra" else "unknown configuration keys ['nope']")
    assert done.stderr.startswith("dlmsvdd train: error: ") and expected in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text,message", [
    ("extra: &a [1, *a]\n", "extra holds more than 65536"),  # contains itself
    ("extra: {when: 2026-11-25}\n", "extra holds a date value; it takes JSON values only"),
    ("extra: {1: one}\n", "extra: keys must be strings, got 1"),
    (f"extra: {{note: {'y' * 70000}}}\n", "extra holds more than 65536"),
])
def test_extra_holds_short_json_notes(text, message, tmp_path):
    from dlmsvdd.training.config import TrainConfig

    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_yaml(tmp_path / "c.yaml")
    # the Python API too: the trainer copies a configuration (to_dict) before it validates it
    from dlmsvdd.training.trainer import DLMSVDD

    shared = ["x"] * 9
    for _ in range(5):  # 9**6 strings in 6 lists: a deep copy finishes, and the bound refuses it
        shared = [shared] * 9
    with pytest.raises(ValueError, match="extra holds more than 65536"):
        DLMSVDD(TrainConfig(extra={"bomb": shared}))
    # aliases that stay small are fine, and stored spelt out
    (tmp_path / "c.yaml").write_text("extra: {a: &n [1, 2.5, null, true, 'x'], b: *n, c: {d: *n}}\n")
    cfg = TrainConfig.from_yaml(tmp_path / "c.yaml")
    assert json.loads(json.dumps(cfg.to_dict()["extra"])) == {"a": [1, 2.5, None, True, "x"],
                                                             "b": [1, 2.5, None, True, "x"],
                                                             "c": {"d": [1, 2.5, None, True, "x"]}}
