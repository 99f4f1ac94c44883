"""The paper-protocol benchmark's parts (tests/benchmarks/paper_protocol.py, image_peers.py,
epoch_budget.py) on digits and constructed numbers: Deep SAD's and the classifier's objectives
against their formulas, a peer trained and kept as DLM-SVDD keeps its epochs, what a budget of E
epochs read from a longer run gives against a run of E epochs, the tables, and a run that skips
what its output holds."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from dlmsvdd import DLMSVDD, TrainConfig, datasets, metrics, tasks

from benchmarks import epoch_budget, image_peers, paper_protocol

DIGITS = dict(data="digits", verbose=0, batch_size=32)


def test_deep_sads_centre_loss_and_score_follow_its_paper():
    peer = image_peers.DeepSAD()

    class Rows(torch.utils.data.TensorDataset):
        targets = np.array([1, 1, 1, -1])

    z = torch.tensor([[0.5, 0.05, -0.3], [0.7, 0.01, -0.2], [0.6, -0.2, -0.1], [5.0, 5.0, 5.0]])
    rows = Rows(z, torch.as_tensor(Rows.targets))
    peer.start(torch.nn.Identity(), rows, 2, "cpu")
    # the normals' mean (0.6, -0.0467, -0.2), its coordinate within 0.1 of zero pushed to -0.1
    torch.testing.assert_close(peer.centre, torch.tensor([0.6, -0.1, -0.2]))
    d = ((z - peer.centre) ** 2).sum(1)
    torch.testing.assert_close(peer.score(z), d)
    t = torch.tensor([1, 1, 1, -1])
    torch.testing.assert_close(peer.loss(z, t), (d[:3].sum() + 1.0 / (d[3] + 1e-6)) / 4)


def test_the_classifiers_loss_weighs_the_two_classes_alike():
    peer = image_peers.Classifier()

    class Rows:
        targets = np.array([1] * 6 + [-1] * 2)

    peer.start(None, Rows(), 4, "cpu")
    logits = torch.tensor([[0.3], [-1.0], [2.0], [0.0], [0.5], [-0.5], [1.5], [-2.0]])
    t = torch.as_tensor(Rows.targets)
    y = (t < 0).float()
    p = torch.sigmoid(logits[:, 0])
    expected = -(3.0 * y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()  # anomalies weighed 6 / 2
    torch.testing.assert_close(peer.loss(logits, t), expected)
    torch.testing.assert_close(peer.score(logits), logits[:, 0])


@pytest.mark.parametrize("kind", ["deep_sad", "classifier"])
def test_a_peer_trains_the_recipes_epochs_and_keeps_one_by_validation(kind):
    task = tasks.make_task(datasets.digits(), 4, ratio=0.5, seed=0)
    config = TrainConfig(**DIGITS, normal_class=4, ratio=0.5, epochs=3)
    fitted = image_peers.fit_peer(kind, task, config)
    assert fitted["epochs"] == 3 and 0 <= fitted["kept_epoch"] <= 3
    # each epoch's validation AUROC, the kept epoch's that of the weights returned
    assert len(fitted["val_curve"]) == 4
    assert fitted["val_curve"][fitted["kept_epoch"]] == pytest.approx(fitted["val_auroc"], abs=1e-12)
    assert fitted["test_scores"].shape == (len(task.test),) and np.isfinite(fitted["test_scores"]).all()
    assert metrics.auroc(task.test.targets, fitted["test_scores"]) > 0.8  # digits: an easy task it learns
    again = image_peers.fit_peer(kind, task, config)
    np.testing.assert_array_equal(again["test_scores"], fitted["test_scores"])  # seeded


def test_a_peer_steps_at_dlmsvdds_learning_rates(monkeypatch):
    """Trained alike: with ``lr_schedule="cosine"`` a peer's Adam steps at the rates DLM-SVDD's
    omega-steps take, epoch by epoch (read from the optimisers' steps, not from the schedule)."""
    rates = []

    class RecordingAdam(torch.optim.Adam):
        def step(self, *args, **kwargs):
            rates.append(self.param_groups[0]["lr"])
            return super().step(*args, **kwargs)

    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    task = tasks.make_task(datasets.digits(), 4, ratio=0.5, seed=0)
    config = TrainConfig(**DIGITS, normal_class=4, ratio=0.5, epochs=3, lr_schedule="cosine")
    image_peers.fit_peer("classifier", task, config)
    peer_rates, rates[:] = list(rates), []
    DLMSVDD(config).fit(task.train, task.val)
    assert len(set(peer_rates)) == 3 and sorted(set(peer_rates)) == sorted(set(rates))
    # lowered along the epochs, below the recipe's rate with labels
    assert peer_rates == sorted(peer_rates, reverse=True) and max(peer_rates) < config.training_params(
        n_train=len(task.train), device="cpu")["labelled_lr"]


def test_a_peer_judges_its_epochs_on_dlmsvdds_moving_average(monkeypatch):
    """A peer follows DLM-SVDD's ema_half_life: with labels from scratch on images the average of
    its weights, half-life 1 epoch, follows every optimiser step and its epochs are judged and kept
    on it; given 0 there is none, and other weights are kept."""
    half_lives, per_epoch = [], []
    update = image_peers.WeightAverage.update

    def recording(self, network, steps_per_epoch):
        half_lives.append(self.half_life)
        per_epoch.append(steps_per_epoch)
        return update(self, network, steps_per_epoch)

    monkeypatch.setattr(image_peers.WeightAverage, "update", recording)
    task = tasks.make_task(datasets.digits(), 4, ratio=0.5, seed=0)
    config = dict(**DIGITS, normal_class=4, ratio=0.5, epochs=3)
    fitted = image_peers.fit_peer("classifier", task, TrainConfig(**config))
    steps = len(task.train) // DIGITS["batch_size"]  # the last, short batch dropped
    assert set(half_lives) == {1.0} and per_epoch == [steps] * (3 * steps)
    half_lives[:] = []
    plain = image_peers.fit_peer("classifier", task, TrainConfig(**config, ema_half_life=0))
    assert half_lives == [] and not np.array_equal(plain["test_scores"], fitted["test_scores"])


def test_a_budget_read_from_a_longer_run_is_a_run_of_that_many_epochs():
    """The study's premise: a run of 4 epochs, cut at E = 2 (the epoch its selection keeps among
    0..2, the boundary refitted on those weights), scores as a run of 2 epochs does."""
    task = tasks.make_task(datasets.digits(), 7, ratio=0.5, seed=1)
    config = TrainConfig(**DIGITS, normal_class=7, ratio=0.5, seed=1)
    long = epoch_budget.SnapshotDLMSVDD(config, epochs=4).fit(task.train, task.val)
    assert len(long.snapshots_) == 5
    (row,) = epoch_budget.budget_rows(long, task, [2])
    short = DLMSVDD(config, epochs=2).fit(task.train, task.val)
    assert row["kept_epoch"] == short.best_epoch_ == epoch_budget.kept_epoch(short.history_, 2, "latest")
    f, t = short.scores(task.test)
    assert row["test_auroc"] == pytest.approx(metrics.auroc(t, f), abs=1e-9)
    assert row["val_auroc"] == pytest.approx(metrics.auroc(*short.scores(task.val)[::-1]), abs=1e-9)


def test_kept_epoch_is_the_selection_rule_over_the_first_epochs():
    history = [{"epoch": e, "val_auroc": v, "val_n_anomalous": 10} for e, v in enumerate([0.5, 0.9, 0.85, 0.95, 0.7])]
    assert epoch_budget.kept_epoch(history, 2, "best") == 1
    assert epoch_budget.kept_epoch(history, 2, "latest") == 2  # within 1 / 10 of the best
    assert epoch_budget.kept_epoch(history, 4, "latest") == 3


def test_mean_over_classes_averages_classes_then_seeds_and_the_table_puts_the_paper_beside():
    records = [{"data": "cifar10", "protocol": "labelled", "method": m, "class": c, "ratio": 0.1, "seed": s,
                "auroc": a, "seconds": 1.0}
               for m, base in (("DLM-SVDD", 0.9), ("kNN (k=5) on pixels", 0.6))
               for s in (0, 1) for c, a in ((0, base + 0.02 * s), (1, base + 0.04 + 0.02 * s))]
    mean, std, n = paper_protocol.mean_over_classes(records, "DLM-SVDD", ratio=0.1)
    assert (mean, n) == (pytest.approx(0.93), 2) and std == pytest.approx(0.01)
    table = paper_protocol.labelled_table(records, "cifar10")
    assert "| DLM-SVDD | 0.9300 ± 0.0100 (2 classes) | 1 |" in table
    assert "| Deep SAD (paper) | 0.860 |" in table and "| DLM-SVDD (paper, ResNet-50 ImageNet) | 0.977 |" in table


def test_a_run_appends_each_task_and_skips_what_its_output_holds(tmp_path):
    out = tmp_path / "records.jsonl"
    methods = ["kNN (k=5) on pixels", "LpSVDD on pixels"]
    first = paper_protocol.run("digits", None, "labelled", out, classes=[0, 1], seeds=[0], ratios=[0.5],
                               methods=methods, log=lambda *_: None)
    assert len(first) == 4 and len(out.read_text().splitlines()) == 4
    again = paper_protocol.run("digits", None, "labelled", out, classes=[0, 1, 2], seeds=[0], ratios=[0.5],
                               methods=methods, log=lambda *_: None)
    assert len(again) == 6 and [r["class"] for r in again[4:]] == [2, 2]  # only the new class ran
    task = tasks.make_task(datasets.digits(), 2, ratio=0.5, seed=0)
    X_train = paper_protocol.flat_inputs(task.train)
    X_test = paper_protocol.flat_inputs(task.test)
    y_train = task.train.targets
    normal = X_train[y_train > 0]
    distances = np.sqrt(((X_test[:, None, :] - normal[None]) ** 2).sum(-1))
    expected = metrics.auroc(task.test.targets, np.sort(distances, axis=1)[:, 4])  # the 5th nearest normal
    assert again[4]["auroc"] == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="unknown protocol"):
        paper_protocol.run("digits", None, "other", out, classes=[0], seeds=[0])


def test_goal_rows_hold_only_at_or_above_their_targets():
    def record(method, auroc, data="fashion_mnist", protocol="labelled", ratio=0.1):
        return {"data": data, "protocol": protocol, "method": method, "class": 0, "ratio": ratio, "seed": 0,
                "auroc": auroc}

    rows = paper_protocol.goal_rows([record("DLM-SVDD", 0.976), record("DLM-SVDD", 0.98, ratio=0.75)], "fashion_mnist")
    assert [holds for _, holds in rows] == [True, False]  # 0.976 >= 0.976; 0.98 < the paper's 0.988
    cifar = [record("DLM-SVDD", 0.90, "cifar10"), record("Deep SAD (same CNN)", 0.85, "cifar10"),
             record("kNN (k=5) on pixels", 0.91, "cifar10")]
    rows = dict(paper_protocol.goal_rows(cifar, "cifar10"))
    assert list(rows.values()) == [True, False, True]  # above Deep SAD, below kNN, above the paper's Deep SAD 0.860
    unlabelled = [record("DLMSVDD()", 0.70, "cifar10", "unlabelled", None), record("kNN (k=5)", 0.65, "cifar10",
                                                                                      "unlabelled", None)]
    assert [holds for _, holds in paper_protocol.goal_rows(unlabelled, "cifar10")] == [True, True]


def test_the_budget_table_names_each_network_and_its_budgets():
    def record(overrides, cls, val, test):
        return {"normal_class": cls, "ratio": 0.1, "overrides": overrides,
                "budgets": [{"epochs": 10, "val_auroc": val, "test_auroc": test},
                            {"epochs": 30, "val_auroc": val + 0.01, "test_auroc": test + 0.01}]}

    text = epoch_budget.table([record({}, 0, 0.9, 0.8), record({"cnn_width": 16}, 0, 0.85, 0.75)], budgets=(10, 30))
    assert "| 32 x 4 | 0 | 0.1 | 0.9000 / 0.8000 | 0.9100 / 0.8100 |" in text
    assert "| 16 x 4 | 0 | 0.1 | 0.8500 / 0.7500 | 0.8600 / 0.7600 |" in text


def test_the_unlabelled_and_long_tailed_tables_average_the_classes_run():
    unlabelled = [{"data": "cifar10", "protocol": "unlabelled", "method": m, "class": c, "ratio": None, "seed": 0,
                   "auroc": a + 0.1 * c, "seconds": 2.0} for m, a in (("DLMSVDD()", 0.6), ("kNN (k=5)", 0.5)) for c in (0, 1)]
    text = paper_protocol.unlabelled_table(unlabelled, "cifar10")
    assert "| DLMSVDD() | 0.6500 | 2 | 2 |" in text and "| Deep SVDD (paper) | 0.648 | 10 | |" in text
    long_tailed = [{"data": "cifar10", "protocol": "long-tailed", "method": "DLM-SVDD", "class": c, "rho": rho, "seed": 0,
                    "auroc": 0.9, "balanced_accuracy": b, "seconds": 3.0}
                   for rho, b in ((100, 0.8), (10, 0.9)) for c in (0, 1)]
    text = paper_protocol.long_tailed_table(long_tailed)
    assert "| DLM-SVDD | 80.00 (2 classes) | 90.00 (2 classes) | 3 |" in text
    assert "| DLM-SVDD (paper, joint) | 86.79 | 92.59 | |" in text


def test_methods_named_on_the_command_line_may_hold_a_comma():
    """The frozen-CNN ablation's name holds a comma; --methods split it into two unknown names."""
    names = paper_protocol.method_names("DLM-SVDD, CNN frozen")
    assert names == ["DLM-SVDD, CNN frozen"]
    assert paper_protocol.method_names("DLM-SVDD,DLM-SVDD, CNN frozen,classifier (same CNN)") == \
        ["DLM-SVDD", "DLM-SVDD, CNN frozen", "classifier (same CNN)"]
    assert paper_protocol.method_names("kNN (k=5) on pixels, nonsense") == ["kNN (k=5) on pixels", "nonsense"]
    assert set(names) <= set(paper_protocol.LABELLED)


GPU_SCRIPT = Path(__file__).parent / "benchmarks" / "gpu_paper_protocol.sh"


def _tiny_fashion_mnist(folder) -> None:
    """A tiny Fashion-MNIST-shaped array file: 12 images of each class, class 0 darker above."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 12)
    images = rng.integers(0, 256, size=(len(labels), 28, 28), dtype=np.uint8)
    images[labels == 0, :14] //= 4  # the pixels tell class 0 apart
    np.savez(folder / "fashion_mnist.npz", X_train=images, y_train=labels, X_test=images, y_test=labels)


def _gpu_script(root, out, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(GPU_SCRIPT), str(root), str(out)], env={**os.environ, "DEVICE": "cpu", **env},
                          text=True, capture_output=True, timeout=600)


def test_the_gpu_script_runs_each_task_as_a_process_and_merges_their_records(tmp_path):
    """tests/benchmarks/gpu_paper_protocol.sh on a tiny Fashion-MNIST-shaped file, on the CPU: every
    (class, ratio, method) job of SPLIT_METHODS its own process, their records in one file, the
    table; a deadline already past starts nothing."""
    _tiny_fashion_mnist(tmp_path)
    env = {"CLASSES": "0,1", "RATIOS": "0.5", "WORKERS": "2", "SPLIT_METHODS": "1",
           "ALONE": "0", "METHODS": "kNN (k=5) on pixels;LpSVDD on pixels", "TAG": "tiny"}
    done = _gpu_script(tmp_path, tmp_path / "out", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "out" / "tiny.jsonl").read_text().splitlines()]
    assert sorted((r["class"], r["method"]) for r in records) == [
        (0, "LpSVDD on pixels"), (0, "kNN (k=5) on pixels"), (1, "LpSVDD on pixels"), (1, "kNN (k=5) on pixels")]
    assert all(r["ratio"] == 0.5 and 0 <= r["auroc"] <= 1 for r in records)
    assert "| kNN (k=5) on pixels |" in (tmp_path / "out" / "tiny.md").read_text()
    late = _gpu_script(tmp_path, tmp_path / "late", **{**env, "DEADLINE": "1", "TAG": "late"})
    assert late.returncode == 0 and late.stdout.count("not started (deadline)") == 4
    assert not (tmp_path / "late" / "late.jsonl").exists()


def test_the_gpu_script_runs_the_long_tailed_protocol(tmp_path):
    """PROTOCOL=long-tailed: one process per (class, rho), the long-tailed pool's records (balanced
    accuracy), and the long-tailed table (rho columns, the paper's CIFAR-10-LT rows)."""
    _tiny_fashion_mnist(tmp_path)
    done = _gpu_script(tmp_path, tmp_path / "out", PROTOCOL="long-tailed", CLASSES="0", RHOS="2", WORKERS="1",
                       ALONE="0", METHODS="DLM-SVDD, CNN frozen", SET="epochs=1", TAG="lt")
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "out" / "lt.jsonl").read_text().splitlines()]
    assert [(r["protocol"], r["class"], r["rho"], r["method"]) for r in records] == [
        ("long-tailed", 0, 2.0, "DLM-SVDD, CNN frozen")]
    assert 0 <= records[0]["balanced_accuracy"] <= 1 and records[0]["n_train"] < 96  # the pool, not all 120
    table = (tmp_path / "out" / "lt.md").read_text()
    assert "| rho 2 |" in table and "| DLM-SVDD, CNN frozen |" in table and "class 0 rho 2" in done.stdout


def test_dlmsvdds_record_holds_each_epochs_validation_auroc():
    """The record's ``val_curve`` is the fit's history, epoch by epoch; at the kept epoch it is the
    kept weights' validation AUROC up to the final boundary's refit from scratch (a solver tolerance)."""
    overrides = {"batch_size": DIGITS["batch_size"], "epochs": 3}
    record = paper_protocol.labelled_task(datasets.digits(), 4, 0.5, 0, overrides, ["DLM-SVDD"])["DLM-SVDD"]
    curve = record["val_curve"]
    assert len(curve) == 4 and all(0.5 < v <= 1.0 for v in curve)
    assert curve[record["kept_epoch"]] == pytest.approx(record["val_auroc"], abs=0.01)
