"""A sweep folder's records are the truth: stale, half-written and concurrent
results, unsafe folder names and dead workers (issue 15's reproduced failures).

Training is replaced by ``fake_train`` (a result shaped as the real one, from
the config) wherever the run itself is not the point, so these stay fast; the
records, the lock and the engines around it are the real ones."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dlmsvdd.cli import main

SWEEP, RUNS, TABLES = "dlmsvdd.experiments.sweep", "dlmsvdd.experiments.runs", "dlmsvdd.experiments.tables"
sweep = importlib.import_module(SWEEP)
tables = importlib.import_module(TABLES)

BASE = {"data": "digits", "backbone": "small_cnn", "weights": None, "epochs": 2, "batch_size": 64, "lr": 1e-3}
GRID = {"normal_class": [0, 1], "seed": [0, 1]}


def fake_train(cfg):
    """runs.train's return for the config, without training: (model, result, folder)."""
    Path(cfg.output).mkdir(parents=True, exist_ok=True)
    auroc = 0.5 + 0.01 * cfg.normal_class + 0.001 * cfg.seed + 0.0001 * cfg.epochs
    result = {"test": {"auroc": auroc, "balanced_accuracy": auroc, "threshold": 1.0},
              "val": {"auroc": auroc, "balanced_accuracy": auroc}, "best_epoch": cfg.epochs, "epochs": cfg.epochs,
              "seconds": 0.0, "timing": {"mean_seconds_build": 0.1, "mean_seconds_solve": 0.1},
              "alpha_step": {"peak_bytes": 2**20},
              "task_summary": {"normal_class": cfg.normal_class, "class_name": str(cfg.normal_class),
                               "train_normal": 80, "val_normal": 20, "train_anomalous": 8, "val_anomalous": 2}}
    return None, result, Path(cfg.output)


@pytest.fixture
def trained(monkeypatch):
    """fake_train in place of runs.train; the configs it was called with."""
    calls = []

    def train(cfg):
        calls.append(cfg)
        return fake_train(cfg)

    monkeypatch.setattr(importlib.import_module(RUNS), "train", train)
    return calls


def _grid_file(path, base=BASE, grid=GRID):
    path.write_text(yaml.safe_dump({"base": base, "grid": grid}))
    return str(path)


def _stamps(folder):
    return {p: p.stat().st_mtime_ns for p in Path(folder).glob("*/result.json")}


# ---- 1. stale results

def test_a_sweep_with_a_changed_configuration_is_refused_and_keeps_the_folder(tmp_path, trained, capsys):
    spec, out = _grid_file(tmp_path / "grid.yaml"), tmp_path / "sweep"
    assert main(["sweep", spec, "--output", str(out), "--verbose", "0"]) == 0
    capsys.readouterr()
    preset_yaml, stamps = (out / "preset.yaml").read_text(), _stamps(out)
    assert len(stamps) == 4 and len(trained) == 4
    for change, message in ((["--set", "epochs=5"], "epochs: 2 in the folder, 5 asked (4 tasks)"),
                            (["--set", "lr=0.01"], "lr: 0.001 in the folder, 0.01 asked (4 tasks)")):
        assert main(["sweep", spec, "--output", str(out), "--verbose", "0", *change]) == 2
        assert message in capsys.readouterr().err
    assert len(trained) == 4  # nothing ran, nothing was rewritten
    assert (out / "preset.yaml").read_text() == preset_yaml and _stamps(out) == stamps
    with pytest.raises(ValueError, match="epochs: 2 in the folder, 3 asked"):
        sweep.run_sweep(sweep.Sweep({**BASE, "epochs": 3}, GRID), out, progress=False)

    # on request, into a new folder beside it; the same changed sweep again resumes there
    for _ in range(2):
        assert main(["sweep", spec, "--output", str(out), "--verbose", "0", "--set", "epochs=5", "--new-folder"]) == 0
        assert f"sweep {tmp_path / 'sweep-2'}: 4 done" in capsys.readouterr().out
    assert len(trained) == 8 and _stamps(out) == stamps
    assert {json.loads(p.read_text())["config"]["epochs"] for p in (tmp_path / "sweep-2").glob("*/result.json")} == {5}
    # the original settings still resume the original folder, with nothing to run
    assert main(["sweep", spec, "--output", str(out), "--verbose", "0"]) == 0
    assert len(trained) == 8 and "4 done, 0 failed" in capsys.readouterr().out


def test_a_record_without_a_newer_field_counts_it_as_its_default(tmp_path, trained):
    out = tmp_path / "sweep"
    sweep.run_sweep(sweep.Sweep(BASE, GRID), out, progress=False)
    for path in out.glob("*/result.json"):  # as written before 'softplus_power' existed, and with a field since removed
        record = json.loads(path.read_text())
        for part in ("config", "resolved"):
            del record[part]["softplus_power"]
            record[part]["retired_field"] = 1
        path.write_text(json.dumps(record))
    records = sweep.run_sweep(sweep.Sweep(BASE, GRID), out, progress=False)
    assert [r["status"] for r in records] == ["done"] * 4 and len(trained) == 4
    with pytest.raises(ValueError, match="softplus_power: 1.0 in the folder, 2.0 asked"):
        sweep.run_sweep(sweep.Sweep({**BASE, "softplus_power": 2.0}, GRID), out, progress=False)


RECIPE_BASE = {k: v for k, v in BASE.items() if k != "lr"}  # lr left to the scratch recipe: 1e-3


def test_a_result_stores_and_compares_what_the_recipe_resolved(tmp_path, trained, capsys):
    """Issue 24: result.json stored lr as null, so `--set lr=0.001` on a folder trained at the scratch
    recipe's 1e-3 was refused (`lr: None in the folder, 0.001 asked`)."""
    spec, out = _grid_file(tmp_path / "grid.yaml", base=RECIPE_BASE), tmp_path / "sweep"
    assert main(["sweep", spec, "--output", str(out), "--verbose", "0"]) == 0
    record = json.loads(next(out.glob("*/result.json")).read_text())
    assert {k: record["config"][k] for k in ("lr", "recipe", "pretrain", "selection_rule", "cnn_width")} == \
        {"lr": None, "recipe": "auto", "pretrain": None, "selection_rule": None, "cnn_width": None}
    assert {k: record["resolved"][k] for k in ("lr", "recipe", "pretrain", "selection_rule", "cnn_width",
                                               "cnn_branches", "epochs")} == \
        {"lr": 1e-3, "recipe": "scratch", "pretrain": "batchnorm", "selection_rule": "latest", "cnn_width": 32,
         "cnn_branches": 4, "epochs": 2}
    capsys.readouterr()
    for same in (["--set", "lr=0.001"], ["--set", "recipe=scratch", "--set", "cnn_branches=4"]):
        assert main(["sweep", spec, "--output", str(out), "--verbose", "0", *same]) == 0
        assert "4 done" in capsys.readouterr().out and len(trained) == 4  # nothing ran again
    assert main(["sweep", spec, "--output", str(out), "--verbose", "0", "--set", "lr=0.01"]) == 2
    assert "lr: 0.001 in the folder, 0.01 asked (4 tasks)" in capsys.readouterr().err
    assert main(["sweep", spec, "--output", str(out), "--verbose", "0", "--set", "recipe=paper"]) == 2
    err = capsys.readouterr().err
    assert "recipe: 'scratch' in the folder, 'paper' asked" in err and "lr: 0.001 in the folder, 0.0001 asked" in err
    assert len(trained) == 4


def test_a_record_written_before_resolved_values_is_resolved_when_compared(tmp_path, trained):
    """A record of an older version has its config as asked only: resolved by this version's recipes, a
    small CNN field it predates at the shape of before (one branch)."""
    out = tmp_path / "sweep"
    sweep.run_sweep(sweep.Sweep(RECIPE_BASE, GRID), out, progress=False)
    for path in out.glob("*/result.json"):
        record = json.loads(path.read_text())
        del record["resolved"]
        path.write_text(json.dumps(record))
    records = sweep.run_sweep(sweep.Sweep({**RECIPE_BASE, "lr": 0.001}, GRID), out, progress=False)
    assert [r["status"] for r in records] == ["done"] * 4 and len(trained) == 4
    with pytest.raises(ValueError, match="lr: 0.001 in the folder, 0.01 asked"):
        sweep.run_sweep(sweep.Sweep({**RECIPE_BASE, "lr": 0.01}, GRID), out, progress=False)
    for path in out.glob("*/result.json"):  # as written before cnn_branches existed: one network
        record = json.loads(path.read_text())
        del record["config"]["cnn_branches"]
        path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"cnn_branches: 1 in the folder, 4 asked \(4 tasks\)"):
        sweep.run_sweep(sweep.Sweep(RECIPE_BASE, GRID), out, progress=False)
    records = sweep.run_sweep(sweep.Sweep({**RECIPE_BASE, "cnn_branches": 1}, GRID), out, progress=False)
    assert [r["status"] for r in records] == ["done"] * 4 and len(trained) == 4


# ---- 2. half-written results

def test_empty_and_truncated_records_are_run_again(tmp_path, trained, caplog):
    out = tmp_path / "sweep"
    tasks = sweep.Sweep(BASE, GRID).tasks()
    sweep.run_sweep(sweep.Sweep(BASE, GRID), out, progress=False)
    empty, truncated = out / tasks[0][0] / "result.json", out / tasks[1][0] / "result.json"
    empty.write_text("")
    truncated.write_text(truncated.read_text()[:100])
    (out / tasks[2][0] / "result.json").unlink()  # a failure whose record came out empty
    (out / tasks[2][0] / "failed.json").write_text("")
    kept = {p: t for p, t in _stamps(out).items() if p not in (empty, truncated)}

    # the report reads the whole records and names the others
    records = tables.load_records(out)
    assert sorted(r["name"] for r in records) == [tasks[3][0]]
    assert f"{empty}: skipped, empty file" in caplog.text and f"{truncated}: skipped, not JSON" in caplog.text
    assert main(["report", str(out), "--output", str(tmp_path / "report")]) == 0

    records = sweep.run_sweep(sweep.Sweep(BASE, GRID), out, progress=False)
    assert [r["status"] for r in records] == ["done"] * 4
    assert [cfg.output for cfg in trained[4:]] == [str(out / name) for name, _ in tasks[:3]]
    assert not (out / tasks[2][0] / "failed.json").exists()
    assert {p: t for p, t in _stamps(out).items() if p in kept} == kept
    assert json.loads(empty.read_text())["test"] == fake_train(trained[4])[1]["test"]


def test_report_on_unreadable_records_only_names_them(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "result.json").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no finished tasks" in err and f"{tmp_path / 'a' / 'result.json'} (empty file)" in err


def test_a_record_without_what_the_report_reads_is_named_and_run_again(tmp_path, trained, capsys, caplog):
    """Issue 24: a parseable result.json whose config is {} ended `report` with exit code 1 (KeyError: 'data')."""
    out = tmp_path / "sweep"
    tasks = sweep.Sweep(BASE, GRID).tasks()
    sweep.run_sweep(sweep.Sweep(BASE, GRID), out, progress=False)
    hollow = out / tasks[0][0] / "result.json"
    hollow.write_text(json.dumps({**json.loads(hollow.read_text()), "config": {}}))
    no_test = out / tasks[1][0] / "result.json"
    no_test.write_text(json.dumps({k: v for k, v in json.loads(no_test.read_text()).items() if k != "test"}))
    assert main(["report", str(out), "--output", str(tmp_path / "report")]) == 0
    assert f"{hollow}: skipped, not a whole task record (no config.data, config.normal_class, config.seed, " \
           "config.ratio, config.rho)" in caplog.text
    assert f"{no_test}: skipped, not a whole task record (no test)" in caplog.text
    assert "2 finished runs" in (tmp_path / "report" / "report.md").read_text()
    for path in (hollow, no_test):  # alone in a folder: the error names it
        (tmp_path / "alone" / path.parent.name).mkdir(parents=True)
        (tmp_path / "alone" / path.parent.name / "result.json").write_text(path.read_text())
    capsys.readouterr()
    assert main(["report", str(tmp_path / "alone")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlmsvdd report: error: ") and "(no test))" in err and "(no config.data" in err
    # and, as the warning says, a re-run of the sweep runs those tasks again
    records = sweep.run_sweep(sweep.Sweep(BASE, GRID), out, progress=False)
    assert [r["status"] for r in records] == ["done"] * 4
    assert [cfg.output for cfg in trained[4:]] == [str(out / name) for name, _ in tasks[:2]]


DISK_FULL = """
import resource, signal, sys
from pathlib import Path
import importlib
sweep = importlib.import_module({sweep!r})
runs = importlib.import_module({runs!r})
sys.path.insert(0, {tests!r})
from test_sweep_folder import fake_train, BASE

runs.train = fake_train
# a disk that fills up: writes beyond 600 bytes fail (EFBIG) from now on
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
try:
    sweep.run_sweep(sweep.Sweep(BASE, {{}}), sys.argv[1], progress=False)
except OSError as err:
    print("stopped:", err)
"""


def test_a_full_disk_leaves_no_half_record_and_the_task_runs_again(tmp_path, trained):
    out = tmp_path / "sweep"
    script = DISK_FULL.format(sweep=SWEEP, runs=RUNS, tests=str(Path(__file__).parent))
    # cwd: not the source tree, whose dlmsvdd_ext has no compiled module
    run = subprocess.run([sys.executable, "-c", script, str(out)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "stopped:" in run.stdout and "File too large" in run.stdout
    assert not (out / "base" / "result.json").exists() and not (out / "base" / "failed.json").exists()
    assert not list((out / "base").glob(".*.tmp"))  # no temporary file left either
    records = sweep.run_sweep(sweep.Sweep(BASE, {}), out, progress=False)  # space freed: it runs again
    assert [r["status"] for r in records] == ["done"] and len(trained) == 1


# ---- 3. concurrent sweeps

HOLDER = """
import importlib, sys, time
sweep = importlib.import_module({sweep!r})
runs = importlib.import_module({runs!r})

def train(cfg):
    print("training", flush=True)
    time.sleep(300)

runs.train = train
sweep.run_sweep(sweep.Sweep({base!r}, {{}}), sys.argv[1], progress=False)
"""


def test_a_second_sweep_on_a_folder_in_use_is_refused_naming_the_holder(tmp_path, trained, capsys):
    out = tmp_path / "sweep"
    spec = _grid_file(tmp_path / "grid.yaml", grid={})
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(sweep=SWEEP, runs=RUNS, base=BASE), str(out)],
                              cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "training\n"  # it holds the folder and trains
        assert main(["sweep", spec, "--output", str(out), "--verbose", "0"]) == 2
        err = capsys.readouterr().err
        assert f"{out} is in use by another sweep (pid {holder.pid} on " in err
        assert not trained and not (out / "preset.yaml").exists()
    finally:
        holder.kill()
        holder.wait()
    # its lock file stays behind, naming a dead process: taken over
    assert json.loads((out / "sweep.lock").read_text())["pid"] == holder.pid
    assert main(["sweep", spec, "--output", str(out), "--verbose", "0"]) == 0
    assert len(trained) == 1 and json.loads((out / "sweep.lock").read_text())["pid"] == os.getpid()


# ---- 4. folder names

def test_grid_values_give_safe_bounded_unique_folders_inside_the_output(tmp_path, trained):
    values = ["data/cifar10", "a/b/c", "a_b_c", "../../../escape", "..", "x" * 300, "x" * 299 + "y", "/abs/root"]
    out = tmp_path / "one" / "two" / "three" / "sweep"
    records = sweep.run_sweep(sweep.Sweep(BASE, {"root": values, "seed": [0]}), out, progress=False)
    assert [r["status"] for r in records] == ["done"] * len(values)
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == len(values)  # one folder each: none nested, none shared
    assert all(len(p.name) <= 255 and p.resolve().parent == out.resolve() for p in folders)
    assert all((p / "result.json").is_file() and not any(q.is_dir() for q in p.iterdir()) for p in folders)
    # nothing outside the output folder
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if out not in (p, *p.parents)) == \
        ["one", "one/two", "one/two/three"]
    assert sorted(r["config"]["root"] for r in tables.load_records(out)) == sorted(values)
    assert sorted(r["config"]["root"] for r in records) == sorted(values)
    names = [name for name, _ in sweep.Sweep(BASE, {"root": values}).tasks()]
    assert names[0].startswith("root=data_cifar10~") and names[1].startswith("root=a_b_c~")
    assert names[2] == "root=a_b_c"  # a value that is safe as it is keeps its name
    assert sweep.Sweep(BASE, {"normal_class": [0, 1], "lr": [1e-3]}).tasks()[1][0] == "normal_class=1,lr=0.001"


# ---- 5. a dead worker

def die_on_class_4(name, values, folder, threads):
    """The task function in the worker processes: class 4's process is SIGKILLed
    mid-task (as the out-of-memory killer does), the others train (fake)."""
    runs = importlib.import_module(RUNS)
    task = importlib.import_module(SWEEP)._run_task
    if values["normal_class"] == 4:
        (Path(folder) / name).mkdir(parents=True, exist_ok=True)
        os.kill(os.getpid(), signal.SIGKILL)
    runs.train = fake_train
    return task(name, values, folder, threads)


def test_a_sigkilled_worker_is_a_failed_task_and_the_others_finish(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "_run_task", die_on_class_4)
    spec = _grid_file(tmp_path / "grid.yaml", grid={"normal_class": [3, 4, 5]})
    out = tmp_path / "sweep"
    assert main(["sweep", spec, "--output", str(out), "--workers", "2", "--verbose", "0"]) == 1
    assert "2 done, 1 failed" in capsys.readouterr().out
    failed = json.loads((out / "normal_class=4" / "failed.json").read_text())
    assert failed["status"] == "failed" and "WorkerDied" in failed["error"] and "SIGKILL" in failed["error"]
    assert failed["config"]["normal_class"] == 4
    for c in (3, 5):
        assert json.loads((out / f"normal_class={c}" / "result.json").read_text())["config"]["normal_class"] == c


WORKERS_HOLDER = """
import importlib, sys
sys.path.insert(0, {tests!r})
sweep = importlib.import_module({sweep!r})
from test_sweep_folder import BASE, slow_task

sweep._run_task = slow_task
sweep.run_sweep(sweep.Sweep(BASE, {{"seed": [0, 1]}}), sys.argv[1], workers=2, progress=False)
"""


def slow_task(name, values, folder, threads):
    print("task", os.getpid(), flush=True)
    time.sleep(300)


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_task_processes_end_with_a_killed_sweep(tmp_path):
    """No task outlives its sweep's process: it would go on writing into a folder whose lock is gone."""
    script = WORKERS_HOLDER.format(tests=str(Path(__file__).parent), sweep=SWEEP)
    errors = (tmp_path / "holder.err").open("w+")  # a file: an unread pipe could block the holder
    holder = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "sweep")], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        lines = [holder.stdout.readline() for _ in range(2)]
    finally:
        holder.kill()
        holder.wait()
    # once (1 of many CI runs) the holder gave no "task <pid>" line: say what it did instead
    errors.seek(0)
    assert all(line.startswith("task ") for line in lines), \
        f"holder printed {lines!r}, exit {holder.returncode}; its stderr:\n{errors.read()[-3000:]}"
    pids = [int(line.split()[1]) for line in lines]
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


# ---- pieces

def test_records_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from dlmsvdd.experiments import run_outputs

    path = tmp_path / "result.json"
    run_outputs.write_json(path, {"old": 1})

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        run_outputs.write_json(path, {"new": 2})
    assert json.loads(path.read_text()) == {"old": 1} and [p.name for p in tmp_path.iterdir()] == ["result.json"]
