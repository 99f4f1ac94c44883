"""One owner of device placement (issue 47): a model moves whole (network and guard, boundary with its
kernel map and calibration, input consensus), a loaded model lives where it was asked to, and files hold
CPU tensors. On a machine without a GPU, torch's "meta" device stands in for a second device: a part that
``devices.place`` forgets stays on the CPU and ``devices_of`` finds two devices. The same checks run on a
real GPU where there is one (``cuda`` tests)."""

import numpy as np
import pytest
import torch

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks
from dlmsvdd.training import devices

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CPU, META = torch.device("cpu"), torch.device("meta")


@pytest.fixture(scope="module")
def task():
    return tasks.make_task(datasets.digits(), normal_class=1, ratio=0.1, seed=0)


def _fit(task, kernel, device="cpu", **kw):
    config = TrainConfig(backbone="small_cnn", weights=None, epochs=1, batch_size=64, kernel=kernel,
                         n_components=32, verbose=0, device=device, guard=True, **kw)
    return DLMSVDD(config).fit(task.train, task.val)


@pytest.mark.parametrize("kernel", ["exact", "rff", "nystrom", "sorf"])
def test_an_image_model_moves_whole(task, kernel):
    model = _fit(task, kernel)
    assert devices.devices_of(model) == {CPU}
    devices.place(model, META)
    assert devices.devices_of(model) == {META} and model.device == META
    assert devices.devices_of(model.svdd_.backend_) <= {META}  # the kernel map too (a load left it behind)


def test_a_vector_model_and_its_input_consensus_move_whole():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(120, 6)), rng.normal(3, 1, size=(12, 6))])
    y = np.r_[np.ones(120), -np.ones(12)].astype(int)
    model = DLMSVDD(epochs=1, verbose=0, device="cpu").fit(X, y)
    assert model.input_consensus_ is not None
    devices.place(model, META)
    assert devices.devices_of(model) == {META}


def test_devices_of_finds_a_part_left_behind(task):
    """The check itself: a boundary left on the CPU beside a network moved is two devices."""
    model = _fit(task, "rff")
    model.network_.to(META)
    assert devices.devices_of(model) == {CPU, META}


@pytest.mark.parametrize("kernel", ["exact", "rff"])
def test_a_loaded_model_lives_where_it_was_asked_to(task, kernel, tmp_path):
    model = _fit(task, kernel)
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt", device="cpu")
    assert devices.devices_of(loaded) == {CPU}
    np.testing.assert_array_equal(loaded.dissimilarity(task.test), model.dissimilarity(task.test))


def test_cpu_copy_reaches_every_tensor_of_a_nested_state():
    from dlmsvdd_ext.placement import cpu_copy

    state = {"a": torch.ones(2), "b": [torch.zeros(1), {"c": (torch.ones(1), 3)}], "d": "text"}
    copied = cpu_copy(state)
    assert copied["d"] == "text" and copied["b"][1]["c"][1] == 3 and isinstance(copied["b"][1]["c"], tuple)
    assert devices.devices_of(copied) == {CPU}


@cuda
@pytest.mark.parametrize("kernel", ["exact", "rff", "nystrom", "sorf"])
def test_a_gpu_model_saves_cpu_tensors_and_scores_alike_everywhere(task, kernel, tmp_path, monkeypatch):
    model = _fit(task, kernel, device="cuda")
    assert devices.devices_of(model) == {torch.device("cuda", torch.cuda.current_device())}
    f_gpu = model.dissimilarity(task.test)
    model.save(tmp_path / "model.pt")
    on_gpu = DLMSVDD.load(tmp_path / "model.pt")  # where it was trained
    assert devices.devices_of(on_gpu) == devices.devices_of(model)
    np.testing.assert_array_equal(on_gpu.dissimilarity(task.test), f_gpu)  # deterministic kernels
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    state = torch.load(tmp_path / "model.pt", weights_only=True)  # a CPU machine's plain load
    assert devices.devices_of(state) == {CPU}
    on_cpu = DLMSVDD.load(tmp_path / "model.pt")
    assert devices.devices_of(on_cpu) == {CPU}
    np.testing.assert_allclose(on_cpu.dissimilarity(task.test), f_gpu, rtol=2e-5, atol=2e-6)


@cuda
def test_a_model_moves_to_the_gpu_and_back(task):
    model = _fit(task, "rff")
    f_cpu = model.dissimilarity(task.test)
    model.to("cuda")
    assert {d.type for d in devices.devices_of(model)} == {"cuda"}
    np.testing.assert_allclose(model.dissimilarity(task.test), f_cpu, rtol=2e-5, atol=2e-6)
    model.to("cpu")
    assert devices.devices_of(model) == {CPU}
    np.testing.assert_array_equal(model.dissimilarity(task.test), f_cpu)


def test_small_alpha_steps_are_solved_on_the_cpu_and_their_boundary_moved_back():
    cuda = torch.device("cuda", 0)
    assert devices.solve_device(cuda, devices.CPU_SOLVE_ROWS) == CPU
    assert devices.solve_device(cuda, devices.CPU_SOLVE_ROWS + 1) == cuda
    assert devices.solve_device(CPU, 10) == CPU
    assert devices.indexed(CPU) == CPU and devices.indexed(torch.device("cuda", 1)).index == 1


@cuda
def test_a_gpu_fit_of_few_rows_keeps_its_boundary_on_the_gpu(task):
    model = _fit(task, "exact", device="cuda")  # digits: fewer rows than CPU_SOLVE_ROWS
    assert len(task.train) <= devices.CPU_SOLVE_ROWS
    assert devices.devices_of(model) == {devices.indexed(torch.device("cuda"))}
