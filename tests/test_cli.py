"""The dlmsvdd command."""

import json

import pytest

from dlmsvdd.cli import main


def test_bench_prints_and_writes_timings(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--size", "300x16", "--size", "200x33", "--rounds", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rbf_matvec" in printed and "300" in printed
    rows = json.loads(out.read_text())
    assert [(r["n"], r["d"]) for r in rows] == [(300, 16), (200, 33)]
    assert all(r["ours_xy"] > 0 and r["speedup_xy"] > 0 for r in rows)


def test_bad_size_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--size", "12x"])
    assert "expected NxD" in capsys.readouterr().err


def test_demo_trains_and_prints_the_test_auroc(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--epochs", "2", "--output", str(out), "--verbose", "0"]) == 0
    printed = capsys.readouterr().out
    auroc = float(printed.split("test AUROC ")[1].split()[0])
    assert 0.5 < auroc <= 1
    assert "LpSVDD on raw pixels" in printed
    assert json.loads((out / "metrics.json").read_text())["test"]["auroc"] == pytest.approx(auroc, abs=1e-4)


def test_train_from_yaml_then_evaluate_and_score(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("data: digits\nbackbone: small_cnn\nweights: null\nepochs: 1\nnormal_class: 5\n"
                      "kernel: rff\nn_components: 64\nverbose: 0\n")
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--ratio", "0.5", "--output", str(out)]) == 0
    capsys.readouterr()
    saved = (out / "config.yaml").read_text()
    assert "normal_class: 5" in saved and "ratio: 0.5" in saved and "kernel: rff" in saved
    metrics = json.loads((out / "metrics.json").read_text())

    assert main(["evaluate", str(out), "--json", str(tmp_path / "eval.json")]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["auroc"] == pytest.approx(metrics["test"]["auroc"], abs=1e-12)

    assert main(["score", str(out / "model.pt"), "--split", "val", "--output", str(tmp_path / "s.csv")]) == 0
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert rows[0] == "index,target,dissimilarity,p_value,prediction" and len(rows) - 1 == metrics["task_summary"]["val_normal"] + \
        metrics["task_summary"]["val_anomalous"]


def test_train_stopped_short_warns_once(tmp_path, capsys):
    """fw_max_iter: 2 -> training's one aggregated ConvergenceWarning; the run's
    measured alpha-step (metrics.json's alpha_step) records its certificate
    instead of warning a second, raw one."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    config = tmp_path / "run.yaml"
    config.write_text("data: digits\nbackbone: small_cnn\nweights: null\nepochs: 0\nfw_max_iter: 2\nverbose: 0\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["train", "--config", str(config), "--output", str(tmp_path / "run")]) == 0
    convergence = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == 1 and "raise fw_max_iter" in convergence[0], convergence
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["alpha_step"]["converged"] is False


@pytest.mark.parametrize("switch", [[], ["--no-cnn-branch-norm"]])
def test_no_cnn_branch_norm_trains_the_branches_normalised_as_one_vector(tmp_path, switch):
    out = tmp_path / "run"
    assert main(["train", "--data", "digits", "--backbone", "small_cnn", "--weights", "none", "--epochs", "0",
                 "--cnn-branches", "2", "--verbose", "0", "--output", str(out), *switch]) == 0
    from dlmsvdd import DLMSVDD

    model = DLMSVDD.load(out / "model.pt")
    assert model.network_.backbone.branch_norm == (not switch)
    assert model.config.cnn_branch_norm == (False if switch else None)


def test_score_raw_images_from_npy(tmp_path, capsys):
    import numpy as np

    out = tmp_path / "run"
    assert main(["train", "--data", "digits", "--backbone", "small_cnn", "--weights", "none", "--epochs", "0",
                 "--verbose", "0", "--output", str(out)]) == 0
    raw = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)  # raw images in [0, 1]
    np.save(tmp_path / "x.npy", raw)
    capsys.readouterr()
    assert main(["score", str(out), "--npy", str(tmp_path / "x.npy")]) == 0
    lines = capsys.readouterr().out.splitlines()
    from dlmsvdd import DLMSVDD

    model = DLMSVDD.load(out / "model.pt")  # normalised as the task's images were, as model.dissimilarity does
    assert lines[0] == "index,dissimilarity,p_value,prediction"  # raw rows have no target to show
    np.testing.assert_allclose([float(line.split(",")[1]) for line in lines[1:]], model.dissimilarity(raw), rtol=1e-6)


@pytest.mark.parametrize("flags,message", [
    (["--normal-class", "12"], "unknown normal class 12"),
    (["--ratio", "-1"], "ratio must be a number in"),
    (["--data", "cifar10"], "needs a data root"),
    (["--data", "cifar10", "--root", "/nonexistent/data"], "does not exist"),
    (["--backbone", "resnet18", "--weights", "/nonexistent/w.pth"], "does not exist"),
])
def test_bad_input_fails_before_training(flags, message, tmp_path, capsys):
    base = ["train", "--backbone", "small_cnn", "--weights", "none", "--epochs", "1", "--output", str(tmp_path / "r")]
    assert main(base + flags) == 2
    assert message in capsys.readouterr().err
