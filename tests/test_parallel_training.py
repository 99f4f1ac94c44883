"""`dlmsvdd train` under torchrun with 2 CPU processes (gloo): it completes, its
checkpoint loads in a single process, and a frozen-backbone run gives the
single-process run's scores."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from dlmsvdd import TrainConfig
from dlmsvdd.experiments import runs as run
from dlmsvdd.training.trainer import DLMSVDD

FLAGS = ["--data", "digits", "--backbone", "small_cnn", "--weights", "none", "--batch-size", "64", "--lr", "1e-3",
         "--normal-class", "3", "--verbose", "0"]


def torchrun(tmp_path, *flags) -> subprocess.CompletedProcess:
    """Two processes on this machine, rendezvous on localhost; outside the
    source tree, whose dlmsvdd_ext has no compiled module."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "dlmsvdd.cli", "train", *FLAGS, *flags], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def config(**values) -> TrainConfig:
    return TrainConfig(data="digits", backbone="small_cnn", weights=None, batch_size=64, lr=1e-3, normal_class=3,
                       verbose=0, **values)


def test_joint_training_on_two_processes_loads_in_one(tmp_path):
    done = torchrun(tmp_path, "--epochs", "3", "--kernel", "exact", "--output", "run")
    folder = tmp_path / "run"
    assert done.stdout.count("test AUROC") == 1  # rank 0 reports, rank 1 stays quiet
    result = json.loads((folder / "metrics.json").read_text())
    assert result["processes"] == 2
    history = json.loads((folder / "history.json").read_text())
    assert len(history) == 4 and all("omega_loss" in row for row in history[:3])

    model = run.load_model(folder)  # a single process, no process group
    assert model.group_ is None
    task = run.build_task(config(epochs=3))
    f_test, t_test = model.scores(task.test)
    saved = np.loadtxt(folder / "test_scores.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(t_test, saved[:, 0])
    np.testing.assert_allclose(f_test, saved[:, 1], rtol=1e-5, atol=1e-6)
    assert model.evaluate(task.test)["auroc"] == pytest.approx(result["test"]["auroc"], abs=1e-6)
    assert result["test"]["auroc"] > 0.8


def test_frozen_run_on_two_processes_equals_the_single_process_run(tmp_path):
    """No omega-step: the sharded feature pass, bandwidth, alpha-step and
    scores must reproduce one process's (same solver) to rounding."""
    torchrun(tmp_path, "--frozen", "--kernel", "rff", "--n-components", "128", "--solver", "pairwise", "--output", "run",
             "--device", "cpu")
    saved = np.loadtxt(tmp_path / "run" / "test_scores.csv", delimiter=",", skiprows=1)
    cfg = config(frozen=True, kernel="rff", n_components=128, solver="pairwise", device="cpu")
    task = run.build_task(cfg)
    single = DLMSVDD(cfg).fit(task.train, task.val)
    f_test, t_test = single.scores(task.test)
    np.testing.assert_array_equal(t_test, saved[:, 0])
    # float32 features: the shards' batches hold other images than one process's, and oneDNN's channels-last
    # convolutions (the small CNN's, issue 50) round by batch: up to 1.4e-6 relative measured
    np.testing.assert_allclose(saved[:, 1], f_test, rtol=1e-5, atol=1e-7)
    sharded = run.load_model(tmp_path / "run")
    assert sharded.svdd_.b_normal_ == pytest.approx(single.svdd_.b_normal_, rel=1e-6)
    assert sharded.svdd_.b_anomaly_ == pytest.approx(single.svdd_.b_anomaly_, rel=1e-6)
    assert sharded.svdd_.objective_ == pytest.approx(single.svdd_.objective_, rel=1e-6)


def test_more_processes_than_gpus_train_on_the_cpu_or_stop_with_what_to_run():
    """NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): "auto" falls back to the
    CPU (gloo), a GPU asked for by name stops before training."""
    from dlmsvdd.training.parallel import process_device

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert process_device(cuda, auto=True, local_processes=2, gpus=2) == cuda  # one GPU each
    assert process_device(cuda, auto=True, local_processes=2, gpus=1) == cpu
    assert process_device(cpu, auto=False, local_processes=4, gpus=0) == cpu
    assert process_device(torch.device("cuda", 0), auto=False, local_processes=2, gpus=1).index == 0  # as asked
    with pytest.raises(ValueError, match=r"--nproc-per-node 1, or --device cpu"):
        process_device(cuda, auto=False, local_processes=2, gpus=1)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() >= 2, reason="needs exactly one GPU")
def test_two_processes_on_one_gpu_train_on_the_cpu(tmp_path):
    torchrun(tmp_path, "--epochs", "1", "--output", "run")  # device auto
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["device"] == "cpu"


def test_every_train_option_has_a_spelling_torchrun_passes_on():
    """torchrun's parser rejects prefixes of its own options anywhere on the command line."""
    from torch.distributed.run import get_args_parser

    from dlmsvdd.cli import FLAG_ALIASES, SWITCHES, TRAIN_FLAGS

    parser = get_args_parser()
    for flag in [*TRAIN_FLAGS, *SWITCHES, "--config", "--resume"]:
        spellings = [flag, *FLAG_ALIASES.get(flag, ())]
        passed = []
        for spelling in spellings:
            try:
                args = parser.parse_args(["--standalone", "-m", "dlmsvdd.cli", "train", spelling, "1"])
                passed.append(args.training_script_args == ["train", spelling, "1"])
            except SystemExit:
                passed.append(False)
        assert any(passed), flag
