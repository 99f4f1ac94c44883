"""Issue 34's adversarial findings in the `dlmsvdd` command, each with the case
that broke (items 4, 5, 8 and 11 of the issue; the Python API's are in
test_adversarial_fixes.py)."""

import csv
import hashlib
import json
import shutil

import numpy as np
import pytest
import yaml

from dlmsvdd import DLMSVDD
from dlmsvdd.cli import main


def _error(capsys, command: str) -> str:
    """The one-line refusal of an ordinary mistake (exit code 2 checked by the caller)."""
    err = capsys.readouterr().err
    assert err.startswith(f"dlmsvdd {command}: error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def _write_table(path, n_normal=150, n_anomalous=20, seed=0, label=True):
    """A .csv table: 3 feature columns, the anomalies 4 away; labels 0 normal, 1 anomaly."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_normal, 3)), rng.normal(size=(n_anomalous, 3)) + 4])
    y = np.r_[np.zeros(n_normal, int), np.ones(n_anomalous, int)]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b", "c", "label"])
        writer.writerows([*(repr(float(v)) for v in row), int(t)] for row, t in zip(X, y))
    return X, y


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    """A finished table run trained from a relative --path (1 epoch): (run folder, table file)."""
    home = tmp_path_factory.mktemp("table_run")
    _write_table(home / "t.csv")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(home)
        assert main(["train", "--data", "table", "--path", "t.csv", "--epochs", "1", "--verbose", "0",
                     "--output", "run"]) == 0
    return home / "run", home / "t.csv"


# ---- item 3: a table in small units trains


def test_a_table_of_cells_at_1e_minus_30_trains(tmp_path, capsys):
    """Before: exit 2, 'the initial network's the training features collapsed'."""
    X, y = _write_table(tmp_path / "t.csv")
    np.savez(tmp_path / "tiny.npz", X=X * 1e-30, y=y)
    assert main(["train", "--data", "table", "--path", str(tmp_path / "tiny.npz"), "--epochs", "1", "--verbose", "0",
                 "--output", str(tmp_path / "run")]) == 0
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]["auroc"] > 0.95


# ---- item 4: a table run keeps an absolute path and a fingerprint of its file


def test_a_table_run_records_its_files_absolute_path_and_sha256(table_run):
    run, table = table_run
    for stored in (yaml.safe_load((run / "config.yaml").read_text()),
                   DLMSVDD.load(run / "model.pt").config.to_dict()):
        assert stored["path"] == str(table.resolve())
        assert stored["path_sha256"] == hashlib.sha256(table.read_bytes()).hexdigest()


def test_a_table_run_evaluates_from_another_working_directory(table_run, tmp_path, monkeypatch, capsys):
    """Before: `cd / && dlmsvdd evaluate RUN` failed: the relative --path was stored as typed."""
    run, _ = table_run
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["auroc"] == pytest.approx(json.loads((run / "metrics.json").read_text())["test"]["auroc"],
                                               abs=1e-12)


@pytest.mark.parametrize("command", [["evaluate"], ["score", "--split", "test"]])
def test_a_changed_or_missing_table_is_refused_never_re_split(command, table_run, capsys):
    """Before: evaluate re-split the changed file silently (n 90 -> 75, AUROC 1.0 -> 0.0)."""
    run, table = table_run
    original = table.read_bytes()
    try:
        table.write_bytes(b"\n".join(original.splitlines()[:-50]) + b"\n")  # 50 rows dropped
        assert main([command[0], str(run), *command[1:]]) == 2
        err = _error(capsys, command[0])
        assert "changed since the run trained on it" in err and "restore the file the run trained on" in err
        table.unlink()
        assert main([command[0], str(run), *command[1:]]) == 2
        assert "is not there any more: put the file back at that path" in _error(capsys, command[0])
    finally:
        table.write_bytes(original)
    assert main([command[0], str(run), *command[1:]]) == 0


def test_resuming_a_table_run_refuses_a_changed_table(tmp_path, monkeypatch, capsys):
    """The unfinished run's configuration holds the fingerprint: resuming on other rows is refused."""
    from dlmsvdd.training.trainer import DLMSVDD as Trainer

    _write_table(tmp_path / "t.csv")
    save = Trainer._save_training

    def save_then_stop(self, path, next_epoch, *rest):  # the run killed once its first epoch is saved
        save(self, path, next_epoch, *rest)
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_save_training", save_then_stop)
    run = str(tmp_path / "run")
    assert main(["train", "--data", "table", "--path", str(tmp_path / "t.csv"), "--epochs", "3", "--verbose", "0",
                 "--output", run]) == 130
    monkeypatch.undo()
    capsys.readouterr()
    _write_table(tmp_path / "t.csv", seed=1)  # other rows
    assert main(["train", "--resume", run]) == 2
    assert "changed since the run trained on it" in _error(capsys, "train")


# ---- item 5: training again into a finished run folder removes the old model's exports


def test_training_again_removes_the_earlier_models_exports(table_run, tmp_path, capsys):
    """Before: model.onnx and model.torchscript.pt of the old model stayed beside the new model.pt."""
    pytest.importorskip("onnx")
    _, table = table_run
    run = tmp_path / "run"
    train = ["train", "--data", "table", "--path", str(table), "--epochs", "1", "--verbose", "0", "--output", str(run)]
    assert main(train) == 0
    assert main(["export", str(run)]) == 0 and main(["export", str(run), "--format", "torchscript"]) == 0
    assert (run / "model.onnx").is_file() and (run / "model.torchscript.pt").is_file()
    assert main(train[:-2] + ["--seed", "1", "--output", str(run)]) == 0
    assert not (run / "model.onnx").exists() and not (run / "model.torchscript.pt").exists()
    assert DLMSVDD.load(run / "model.pt").config.seed == 1


# ---- item 8: ordinary mistakes end in exit 2 and one `error:` line, and ordinary uses in exit 0


def test_a_one_class_table_run_prints_its_result(tmp_path, capsys):
    """Before: `--nu 1` on a table of normal rows saved the run, then failed formatting the missing AUROC (exit 1)."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "normals.npz", X=rng.normal(size=(200, 3)), y=np.zeros(200, int))
    capsys.readouterr()
    assert main(["train", "--data", "table", "--path", str(tmp_path / "normals.npz"), "--nu", "1", "--epochs", "1",
                 "--verbose", "0", "--output", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "test AUROC n/a (the test split has one class)" in out and str(tmp_path / "run") in out
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]["auroc"] is None


def test_score_npy_reads_an_npz_files_array(table_run, tmp_path, capsys):
    """Before: AttributeError: 'NpzFile' object has no attribute 'dtype' (exit 1)."""
    run, _ = table_run
    rows = np.random.default_rng(1).normal(size=(5, 3))
    np.save(tmp_path / "rows.npy", rows)
    np.savez(tmp_path / "one.npz", rows)  # one array, whatever its name
    np.savez(tmp_path / "named.npz", X=rows, y=np.zeros(5))
    np.savez(tmp_path / "other.npz", a=rows, b=rows)
    outputs = []
    for name in ("rows.npy", "one.npz", "named.npz"):
        capsys.readouterr()
        assert main(["score", str(run), "--npy", str(tmp_path / name)]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2] and len(outputs[0].splitlines()) == 6
    assert main(["score", str(run), "--npy", str(tmp_path / "other.npz")]) == 2
    assert "is an .npz file of 2 arrays (a, b); it is read when it holds one array, or one named X" in \
        _error(capsys, "score")


@pytest.mark.parametrize("command, code", [(["presets"], 0), (["report", "nowhere"], 2), (["export"], 0)])
def test_every_command_takes_verbose(command, code, table_run, capsys):
    """Before: `dlmsvdd export RUN --verbose 0` -> unrecognized arguments (cli.md: every command takes it)."""
    if command == ["export"]:
        command = ["export", str(table_run[0]), "--format", "torchscript"]
    capsys.readouterr()
    assert main([*command, "--verbose", "0"]) == code
    if code:
        assert "unrecognized" not in _error(capsys, command[0])


# ---- item 11: label conventions in score's CSV; flags the data would ignore


def test_score_csv_labels_are_one_convention(table_run, tmp_path, capsys):
    """Before: split rows got target +1/-1 and --npy rows target 0 (the table's 'normal')."""
    run, _ = table_run
    capsys.readouterr()
    assert main(["score", str(run), "--split", "test"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert {r["target"] for r in rows} == {"1", "-1"} and {r["prediction"] for r in rows} <= {"1", "-1"}
    np.save(tmp_path / "rows.npy", np.zeros((3, 3)))
    assert main(["score", str(run), "--npy", str(tmp_path / "rows.npy")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "index,dissimilarity,p_value,prediction"


@pytest.mark.parametrize("flags, message", [
    (["--data", "table", "--path", "t.csv", "--image-size", "8", "--ratio", "0.5"],
     "--ratio, --image-size apply to image data, not to --data table"),
    (["--data", "table", "--path", "t.csv", "--normal-class", "3"], "--normal-class applies to image data"),
    (["--data", "digits", "--path", "t.csv"], "--path applies to --data table, not to --data digits"),
])
def test_flags_the_data_would_ignore_are_refused(flags, message, tmp_path, capsys):
    """Before: silently ignored (with --data digits --path t.csv, digits trained)."""
    assert main(["train", *flags, "--epochs", "1", "--output", str(tmp_path / "run")]) == 2
    assert message in _error(capsys, "train")
    assert not (tmp_path / "run").exists()
