"""Sweeps: a grid of digits runs, resumable after a kill, failures recorded."""

import json
import subprocess
import sys
import time

import pytest

from dlmsvdd.cli import main
from dlmsvdd.experiments.sweep import Sweep, collect, run_sweep

BASE = {"data": "digits", "backbone": "small_cnn", "weights": None, "epochs": 2, "batch_size": 64, "lr": 1e-3,
        "n_components": 32}
GRID = {"normal_class": [0, 1], "seed": [0, 1], "kernel": ["exact", "rff"]}


def _write(path, base=BASE, grid=GRID):
    import yaml

    path.write_text(yaml.safe_dump({"base": base, "grid": grid}))
    return path


def test_sweep_runs_every_task_and_skips_finished_ones(tmp_path):
    sweep = Sweep(BASE, GRID)
    assert len(sweep.tasks()) == 8 and sweep.tasks()[0][0] == "normal_class=0,seed=0,kernel=exact"
    records = run_sweep(sweep, tmp_path, progress=False)
    assert [r["status"] for r in records] == ["done"] * 8
    assert [r["task"] for r in records] == [name for name, _ in sweep.tasks()]
    assert all(0 <= r["test"]["auroc"] <= 1 for r in records)
    assert records[3]["config"]["kernel"] == "rff" and records[3]["config"]["seed"] == 1
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/result.json")}
    run_sweep(sweep, tmp_path, progress=False)  # nothing left to do
    assert stamps == {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/result.json")}


def test_a_killed_sweep_resumes_with_the_missing_tasks(tmp_path):
    spec = _write(tmp_path / "grid.yaml", grid={**GRID, "epochs": [15]})
    out = tmp_path / "sweep"
    # cwd: not the source tree, whose dlmsvdd_ext has no compiled module
    proc = subprocess.Popen([sys.executable, "-m", "dlmsvdd.cli", "sweep", str(spec), "--output", str(out),
                             "--verbose", "0"], cwd=tmp_path)
    deadline = time.time() + 300
    while len(list(out.glob("*/result.json"))) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    finished = {p: p.stat().st_mtime_ns for p in out.glob("*/result.json")}
    assert 2 <= len(finished) < 8, f"the sweep should be killed midway (exit code {proc.returncode})"
    assert main(["sweep", str(spec), "--output", str(out), "--verbose", "0"]) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items())  # finished tasks were not re-run
    assert [r["status"] for r in collect(Sweep.from_yaml(spec), out)] == ["done"] * 8


def test_a_failed_task_is_recorded_and_the_others_finish(tmp_path, capsys):
    # normal class 12 does not exist: that task fails, the other one runs
    spec = _write(tmp_path / "grid.yaml", grid={"normal_class": [12, 3]})
    assert main(["sweep", str(spec), "--output", str(tmp_path / "s"), "--verbose", "0"]) == 1
    failed = json.loads((tmp_path / "s" / "normal_class=12" / "failed.json").read_text())
    assert "unknown normal class 12" in failed["error"]
    assert (tmp_path / "s" / "normal_class=3" / "result.json").is_file()
    assert "1 done, 1 failed" in capsys.readouterr().out


def test_bad_grids_are_refused_before_running(tmp_path):
    with pytest.raises(ValueError, match="unknown configuration keys"):
        Sweep(BASE, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="kernel must be one of"):
        Sweep(BASE, {"kernel": ["exact", "svd"]})
    with pytest.raises(ValueError, match="non-empty list"):
        Sweep(BASE, {"seed": []})
    with pytest.raises(ValueError, match="engine must be one of"):
        run_sweep(Sweep(BASE, {}), tmp_path, engine="slurm")
    with pytest.raises(ValueError, match="threads must be >= 1"):
        run_sweep(Sweep(BASE, {}), tmp_path, threads=0)
    with pytest.raises(ValueError, match="cpus_per_task must be > 0"):
        run_sweep(Sweep(BASE, {}), tmp_path, engine="ray", cpus_per_task=0)


def test_a_task_in_this_process_keeps_the_callers_thread_count(tmp_path):
    import torch

    before = torch.get_num_threads()
    records = run_sweep(Sweep({**BASE, "epochs": 0}, {}), tmp_path, threads=before + 1, progress=False)
    assert records[0]["status"] == "done" and torch.get_num_threads() == before
