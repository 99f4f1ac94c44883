"""The ray engine: test_sweep's digits grid on a local Ray instance gives the
local engine's numbers; resume and failure records work as they do locally."""

import json
import shutil
import subprocess
import sys

import pytest
import ray

from dlmsvdd.experiments import sweep as sweep_module
from dlmsvdd.cli import main
from dlmsvdd.experiments.sweep import Sweep, run_sweep
from test_sweep import BASE, GRID, _write

NAMES = [name for name, _ in Sweep(BASE, GRID).tasks()]


@pytest.fixture(scope="module")
def ray_instance(tmp_path_factory):
    """One small Ray instance for the module; run_sweep uses this connection."""
    with pytest.MonkeyPatch.context() as patch:
        # Ray starts its workers in this directory, first on their path: not the source tree
        patch.chdir(tmp_path_factory.mktemp("ray_cwd"))
        ray.init(num_cpus=2, include_dashboard=False)
        yield
        ray.shutdown()


@pytest.fixture(scope="module")
def local_folder(tmp_path_factory):
    # one thread, as each ray task gets with cpus_per_task=1: the reference numbers
    folder = tmp_path_factory.mktemp("local")
    run_sweep(Sweep(BASE, GRID), folder, threads=1, progress=False)
    return folder


@pytest.fixture(scope="module")
def ray_folder(ray_instance, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray")
    run_sweep(Sweep(BASE, GRID), folder, engine="ray", cpus_per_task=1, progress=False)
    return folder


def _numbers(folder, name):
    """A task's results, without timings and paths, which differ between runs."""
    record = json.loads((folder / name / "result.json").read_text())
    history = json.loads((folder / name / "history.json").read_text())
    return {"test": record["test"], "val": record["val"], "best_epoch": record["best_epoch"],
            "task_summary": record["task_summary"], "history": [{k: v for k, v in epoch.items() if not k.startswith("seconds")}
                                                for epoch in history],
            "test_scores": (folder / name / "test_scores.csv").read_text()}


def test_ray_gives_the_local_numbers_for_the_same_seeds(local_folder, ray_folder):
    assert [r["status"] for r in sweep_module.collect(Sweep(BASE, GRID), ray_folder)] == ["done"] * 8
    for name in NAMES:
        # Exactly equal: the same seeds at the same thread count give the same floats
        # (at 2 threads against 1, thresholds differ in the last bits).
        assert _numbers(ray_folder, name) == _numbers(local_folder, name), name
    history = json.loads((ray_folder / NAMES[0] / "history.json").read_text())
    assert {"b_normal", "b_anomaly", "val_auroc"} <= set(history[0])  # the compared history holds the boundary


def test_ray_resumes_with_the_missing_tasks(ray_folder, tmp_path):
    folder = shutil.copytree(ray_folder, tmp_path / "sweep")  # copy2: modification times kept
    for name in NAMES[:2]:
        shutil.rmtree(folder / name)
    finished = {p: p.stat().st_mtime_ns for p in folder.glob("*/result.json")}
    assert len(finished) == 6
    records = run_sweep(Sweep(BASE, GRID), folder, engine="ray", progress=False)
    assert [r["status"] for r in records] == ["done"] * 8
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items())  # finished tasks were not re-run
    for name in NAMES[:2]:
        assert _numbers(folder, name) == _numbers(ray_folder, name)


def test_without_a_connection_a_sweep_starts_a_local_instance_and_shuts_it_down(tmp_path):
    # a fresh driver, in a directory that is not the source tree, with nothing to reuse
    base = {**BASE, "epochs": 0}
    code = ("import ray\nfrom dlmsvdd.experiments.sweep import Sweep, run_sweep\n"
            f"records = run_sweep(Sweep({base!r}, {{}}), 'sweep', engine='ray', progress=False)\n"
            "assert records[0]['status'] == 'done', records\nassert not ray.is_initialized()\n")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
    assert (tmp_path / "sweep" / "base" / "result.json").is_file()


def test_failed_tasks_and_dead_workers_are_recorded_and_the_others_finish(ray_instance, tmp_path, monkeypatch,
                                                                          capsys):
    def crash_on_class_4(name, values, folder, threads):
        # defined here so that Ray ships it by value; in the worker dlmsvdd.experiments.sweep is unpatched
        import os

        from dlmsvdd.experiments.sweep import _run_task

        if values["normal_class"] == 4:
            os._exit(1)  # the worker process dies: no failed.json from the task itself
        return _run_task(name, values, folder, threads)

    monkeypatch.setattr(sweep_module, "_run_task", crash_on_class_4)
    # normal class 12 does not exist: that task fails in its worker and records it
    spec = _write(tmp_path / "grid.yaml", base={**BASE, "epochs": 1}, grid={"normal_class": [12, 4, 3]})
    out = tmp_path / "s"
    assert main(["sweep", str(spec), "--output", str(out), "--engine", "ray", "--cpus-per-task", "1",
                 "--verbose", "0"]) == 1
    assert "unknown normal class 12" in json.loads((out / "normal_class=12" / "failed.json").read_text())["error"]
    crashed = json.loads((out / "normal_class=4" / "failed.json").read_text())
    assert crashed["status"] == "failed" and "WorkerCrashedError" in crashed["error"]
    assert (out / "normal_class=3" / "result.json").is_file()
    assert "1 done, 2 failed" in capsys.readouterr().out


def test_bad_ray_setups_are_refused_before_running(ray_instance, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="already connected to Ray"):
        run_sweep(Sweep(BASE, {}), tmp_path / "a", engine="ray", address="auto")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dlmsvdd_ext").mkdir()  # as in a source checkout
    with pytest.raises(ValueError, match="cannot start from .* its workers would import .*dlmsvdd_ext"):
        run_sweep(Sweep(BASE, {}), tmp_path / "b", engine="ray")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_missing_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'dlmsvdd\[ray\]'"):
        run_sweep(Sweep(BASE, {}), tmp_path / "s", engine="ray")
    assert not (tmp_path / "s").exists()
