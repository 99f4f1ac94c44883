"""Per-epoch checkpoints and `dlmsvdd train --resume`: a run killed mid-way
(SIGKILL, or Ctrl-C) and resumed ends exactly as the same run left alone."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

EPOCHS = 10
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # the same thread count for every run: the same rounding


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    """An ImageFolder of digits as 16-pixel RGB PNGs: its training augmentation (random flips) draws
    from torch's generator, so a resumed run matches only if that generator's state came back."""
    from PIL import Image
    from sklearn.datasets import load_digits

    root = tmp_path_factory.mktemp("images")
    digits = load_digits()
    for i, (image, label) in enumerate(zip(digits.images[:300], digits.target[:300])):
        if label < 3:
            (root / str(label)).mkdir(exist_ok=True)
            pixels = np.kron(image / 16 * 255, np.ones((2, 2))).astype(np.uint8)
            Image.fromarray(np.stack([pixels] * 3, axis=-1)).save(root / str(label) / f"{i}.png")
    return root


@pytest.fixture(scope="module")
def FLAGS(image_root):
    return ["--data", "image_folder", "--root", str(image_root), "--image-size", "16", "--backbone", "small_cnn",
            "--weights", "none", "--batch-size", "32", "--lr", "1e-3", "--normal-class", "0", "--ratio", "0.2", "--epochs", str(EPOCHS),
            "--verbose", "0"]


def _sigint_as_in_a_terminal() -> None:
    """In the child before it runs: SIGINT at its default action. A test run started as a
    background job of a non-interactive shell (CI's, say) has SIGINT ignored, its children
    inherit that, and Python turns SIGINT into KeyboardInterrupt only where it is not
    ignored: the Ctrl-C test's run then finished as if never interrupted (exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(cwd, *args) -> subprocess.Popen:
    """The command in a process of its own, outside the source tree (whose dlmsvdd_ext has no compiled module)."""
    return subprocess.Popen([sys.executable, "-m", "dlmsvdd.cli", *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_sigint_as_in_a_terminal)


def _finish(process: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _stop_after_a_checkpoint(process: subprocess.Popen, folder, sig) -> int:
    """Sends ``sig`` as soon as the run has saved an epoch; returns the epoch the saved state continues at."""
    path = folder / "checkpoint.pt"
    deadline = time.monotonic() + 300
    while not path.exists():
        assert process.poll() is None, _finish(process).stderr[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.005)
    process.send_signal(sig)
    _finish(process)
    assert not (folder / "model.pt").exists(), "the run finished before it could be stopped"
    from dlmsvdd.training import checkpoints

    return checkpoints.read(path, checkpoints.TRAINING)["next_epoch"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, FLAGS):
    folder = tmp_path_factory.mktemp("whole")
    done = _finish(_start(folder, "train", *FLAGS, "--output", "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "run"


def _same_run(resumed, whole) -> None:
    metrics = [json.loads((f / "metrics.json").read_text()) for f in (resumed, whole)]
    assert metrics[0]["test"] == metrics[1]["test"]  # AUROC, balanced accuracy, threshold: exactly
    assert metrics[0]["best_epoch"] == metrics[1]["best_epoch"]
    assert (resumed / "test_scores.csv").read_text() == (whole / "test_scores.csv").read_text()
    histories = [json.loads((f / "history.json").read_text()) for f in (resumed, whole)]
    for a, b in zip(*histories, strict=True):
        assert {k: v for k, v in a.items() if not k.startswith("seconds")} == \
            {k: v for k, v in b.items() if not k.startswith("seconds")}
    models = [torch.load(f / "model.pt", weights_only=True) for f in (resumed, whole)]
    for key, value in models[1]["network"].items():
        assert torch.equal(models[0]["network"][key], value), key
    assert not (resumed / "checkpoint.pt").exists()  # removed once model.pt is written


def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path, uninterrupted, FLAGS):
    process = _start(tmp_path, "train", *FLAGS, "--output", "run")
    folder = tmp_path / "run"
    saved_at = _stop_after_a_checkpoint(process, folder, signal.SIGKILL)
    assert 1 <= saved_at <= EPOCHS

    # a fresh start into the folder of an unfinished run is refused, pointing at --resume
    refused = _finish(_start(tmp_path, "train", *FLAGS, "--output", "run"))
    assert refused.returncode == 2 and "--resume" in refused.stderr and "Traceback" not in refused.stderr

    done = _finish(_start(tmp_path, "train", "--resume", "run", "--verbose", "0"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "test AUROC" in done.stdout
    _same_run(folder, uninterrupted)
    log = (folder / "log.txt").read_text()
    assert f"resumed from run/checkpoint.pt at epoch {saved_at}" in log and "epoch 0:" in log  # one log, appended


def test_ctrl_c_exits_130_saying_what_was_saved_and_resumes(tmp_path, uninterrupted, FLAGS):
    process = _start(tmp_path, "train", *FLAGS, "--output", "run")
    path = tmp_path / "run" / "checkpoint.pt"
    while not path.exists():
        assert process.poll() is None
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    done = _finish(process)
    assert done.returncode == 130
    assert "dlmsvdd train: interrupted; epochs 0 to" in done.stderr and "dlmsvdd train --resume run" in done.stderr
    assert "Traceback" not in done.stderr
    done = _finish(_start(tmp_path, "train", "--resume", "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    _same_run(tmp_path / "run", uninterrupted)


def test_resume_refuses_other_settings_and_finished_runs(tmp_path, uninterrupted, capsys):
    from dlmsvdd.cli import main

    assert main(["train", "--resume", str(tmp_path), "--lr", "0.1"]) == 2
    assert "drop the other flags (lr)" in capsys.readouterr().err
    assert main(["train", "--resume", str(uninterrupted)]) == 2
    assert "it finished: model.pt is there" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


def test_a_checkpoint_written_by_another_configuration_is_refused(tmp_path):
    """DLMSVDD.fit(resume=True) checks the state it continues was written by the same configuration."""
    from dlmsvdd import TrainConfig, datasets, tasks
    from dlmsvdd.training import checkpoints
    from dlmsvdd.training.trainer import DLMSVDD

    task = tasks.make_task(datasets.digits(), normal_class=2, ratio=0.2, seed=0)
    cfg = TrainConfig(backbone="small_cnn", weights=None, epochs=1, lr=1e-3, batch_size=64, verbose=0)
    path = tmp_path / "checkpoint.pt"
    DLMSVDD(cfg).fit(task.train, task.val, checkpoint=path)
    state = checkpoints.read(path, checkpoints.TRAINING)
    assert state["next_epoch"] == 2 and state["boundary"]["scalars"]["gamma_"] > 0
    assert len(state["boundary"]["alpha"]) == len(task.train)  # the warm start's dual
    with pytest.raises(ValueError, match=r"another configuration \(lr: 0.001 there, 0.01 here\)"):
        DLMSVDD(cfg, lr=1e-2).fit(task.train, task.val, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match="not a model"):
        DLMSVDD.load(path)


def test_a_resumed_fit_does_not_repeat_step_0(tmp_path, monkeypatch):
    """The state a fit resumes from holds the network after step 0; running step 0 again (an
    autoencoder or Deep SAD's training: minutes on a large set) was thrown away."""
    from dlmsvdd import TrainConfig, datasets, tasks
    from dlmsvdd.training import pretrain
    from dlmsvdd.training.trainer import DLMSVDD

    task = tasks.make_task(datasets.digits(), normal_class=2, ratio=0.2, seed=0)
    cfg = TrainConfig(backbone="small_cnn", weights=None, epochs=2, lr=1e-3, batch_size=64, verbose=0,
                      pretrain="autoencoder", pretrain_steps=3)
    whole = DLMSVDD(cfg).fit(task.train, task.val)

    class Stop(Exception):
        pass

    def stop_at_epoch_1(row):
        if row["epoch"] == 1:
            raise Stop

    path = tmp_path / "checkpoint.pt"
    with pytest.raises(Stop):
        DLMSVDD(cfg).fit(task.train, task.val, checkpoint=path, callback=stop_at_epoch_1)
    steps = []
    real = pretrain.autoencoder
    monkeypatch.setattr(pretrain, "autoencoder", lambda *a: steps.append(a[2]) or real(*a))
    resumed = DLMSVDD(cfg).fit(task.train, task.val, checkpoint=path, resume=True)
    assert steps == [] and resumed.pretrain_losses_ == []
    np.testing.assert_array_equal(resumed.scores(task.test)[0], whole.scores(task.test)[0])


def test_the_random_generators_come_back():
    import random

    from dlmsvdd.training import checkpoints

    states = checkpoints.rng_states()
    expected = (torch.rand(3), np.random.rand(3), random.random())
    checkpoints.set_rng_states(states)
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(expected[0], got[0]) and np.array_equal(expected[1], got[1]) and expected[2] == got[2]
