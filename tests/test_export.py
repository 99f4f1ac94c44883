"""The exported scorer (ONNX through onnxruntime, TorchScript through
torch.jit.load) against DLMSVDD.dissimilarity on every kernel backend, from
raw images; images of the wrong shape refused; `dlmsvdd export` and
`dlmsvdd score --images` against the dataset path."""

import copy
import csv
import os
import subprocess
import sys
import warnings

import numpy as np
import onnxruntime as ort  # the export extra (the test extra installs it)
import pytest
import torch

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks
from dlmsvdd.cli import main
from dlmsvdd.data.sources import STATS
from dlmsvdd_ext.kernels import BACKENDS

# The parity the export promises: 1e-5 relative, or 5e-6 absolute where f is near 0. f = 1 - 2 k'a + a'Ka is
# a difference of terms of size about 1 + a'Ka, which float32 rounds at about 1e-7 each, and the features'
# rounding reaches f multiplied by gamma: at f = 0.03 both the compiled kernels and the exported scorer are
# 2e-5 relative from a float64 evaluation; with Nystrom on the 64-wide small CNN (gamma 7.6) both are 4e-6
# absolute from it near f = 0.1 (3.8e-6 and 4.3e-6).
RTOL, ATOL = 1e-5, 5e-6


def _config(**kw):
    return TrainConfig(**{**dict(backbone="small_cnn", weights=None, epochs=2, lr=1e-3, batch_size=64,
                                 n_components=48, verbose=0), **kw})


@pytest.fixture(scope="module")
def task():
    return tasks.make_task(datasets.digits(), normal_class=3, ratio=0.5, seed=0)


@pytest.fixture(scope="module")
def trained(task):
    return DLMSVDD(_config()).fit(task.train, task.val)


@pytest.fixture(scope="module")
def raw_test(task):
    """The test set's raw images, floats in [0, 1] (N, 1, 8, 8), as the digits source holds them."""
    return task.test.pool.images[task.test.split.indices]


def test_arrays_given_to_a_task_model_are_raw_images(trained, raw_test):
    """Issue 24, item 2: before, a raw image array reached the network without the task's normalisation
    (mean 0.3, std 0.38 on digits): scores off by up to 13x relative; uint8 was divided by 255 only."""
    mean, std = STATS["digits"]
    inputs = (raw_test - mean[0]) / std[0]  # what the task's transform gives the network
    reference = trained.scores(torch.utils.data.TensorDataset(inputs, torch.ones(len(inputs))))[0]
    np.testing.assert_allclose(trained.dissimilarity(raw_test), reference, rtol=RTOL, atol=ATOL)
    pixels = (raw_test * 255).round().to(torch.uint8)
    by_hand = (pixels.float() / 255 - mean[0]) / std[0]
    reference = trained.scores(torch.utils.data.TensorDataset(by_hand, torch.ones(len(by_hand))))[0]
    np.testing.assert_allclose(trained.dissimilarity(pixels.numpy()), reference, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(trained.predict(pixels), np.where(reference >= trained.threshold_, -1, 1))
    for call in (trained.dissimilarity, trained.preprocess):  # int64 pixels 0-255 are not images in [0, 1]
        with pytest.raises(ValueError, match=r"holds torch.int64 values; this model takes grey images"):
            call(pixels.long())


def _model(trained, task, backend):
    """The trained network with a boundary of the given backend (the network frozen: only the boundary is new)."""
    if backend == "exact":
        return trained
    backbone = copy.deepcopy(trained.network_.backbone)
    return DLMSVDD(_config(kernel=backend, frozen=True), backbone=backbone).fit(task.train, task.val)


def _torchscript(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is marked deprecated in torch
        return torch.jit.load(str(path))


def _assert_decisions(decision, f_ref, threshold, predicted):
    """Decisions as DLMSVDD.predict's wherever f is not within rounding of the threshold."""
    clear = np.abs(f_ref - threshold) > 4 * (RTOL * abs(threshold) + ATOL)
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(np.asarray(decision)[clear], predicted[clear])


@pytest.mark.parametrize("backend", BACKENDS)
def test_exported_scores_equal_dissimilarity(backend, trained, task, raw_test, tmp_path):
    model = _model(trained, task, backend)
    reference = model.dissimilarity(task.test)  # the dataset path: transform, network, compiled kernels
    predicted = model.predict(task.test)

    onnx_path = model.export(tmp_path / "m.onnx")
    session = ort.InferenceSession(str(onnx_path))
    f, decision, _ = session.run(None, {"images": raw_test.numpy()})
    np.testing.assert_allclose(f, reference, rtol=RTOL, atol=ATOL)
    assert f.dtype == np.float32 and decision.dtype == np.int64
    _assert_decisions(decision, reference, model.threshold_, predicted)

    scorer = _torchscript(model.export(tmp_path / "m.pt", format="torchscript"))
    f, decision, _ = scorer(raw_test)
    np.testing.assert_allclose(f.numpy(), reference, rtol=RTOL, atol=ATOL)
    _assert_decisions(decision.numpy(), reference, model.threshold_, predicted)
    f_grey, _, _ = scorer(raw_test[:, 0])  # grey images may come as (N, H, W)
    np.testing.assert_array_equal(f_grey.numpy(), f.numpy())


def test_uint8_images_through_onnx_and_torchscript(trained, raw_test, tmp_path):
    pixels = (raw_test * 255).round().to(torch.uint8)
    mean, std = STATS["digits"]
    inputs = (pixels.float() / 255 - mean[0]) / std[0]  # ToTensor, Normalize by hand: the network's inputs
    reference = trained.scores(torch.utils.data.TensorDataset(inputs, torch.ones(len(inputs))))[0]
    session = ort.InferenceSession(str(trained.export(tmp_path / "u8.onnx", input_dtype="uint8")))
    assert session.get_inputs()[0].type == "tensor(uint8)"
    np.testing.assert_allclose(session.run(None, {"images": pixels.numpy()})[0], reference, rtol=RTOL, atol=ATOL)
    scorer = _torchscript(trained.export(tmp_path / "m.pt", format="torchscript"))
    np.testing.assert_allclose(scorer(pixels)[0].numpy(), reference, rtol=RTOL, atol=ATOL)


def test_wrong_images_are_refused_with_what_the_model_expects(trained, raw_test, tmp_path):
    expects = "grey images (N, 1, 8, 8) or (N, 8, 8)"
    scorer = _torchscript(trained.export(tmp_path / "m.pt", format="torchscript"))
    for bad in (raw_test[:4, :, :7], raw_test[:4].expand(-1, 3, -1, -1), raw_test[:4, 0, 0]):
        with pytest.raises(Exception, match=r"expects grey images \(N, 1, 8, 8\)"):
            scorer(bad)
        with pytest.raises(ValueError, match=r"expects grey images \(N, 1, 8, 8\)"):
            trained.preprocess(bad)
    session = ort.InferenceSession(str(trained.export(tmp_path / "m.onnx")))
    with pytest.raises(Exception, match="index: 1 Got: 3 Expected: 1"):
        session.run(None, {"images": np.zeros((2, 3, 8, 8), np.float32)})
    meta = session.get_modelmeta()
    assert expects in meta.custom_metadata_map["input"] and expects in meta.description
    assert float(meta.custom_metadata_map["threshold"]) == trained.threshold_


def _write_image_folder(root, rng, n_train=20, n_test=8, size=12):
    """root/{train,test}/<class>/NNN.png: three classes of RGB images with a class-dependent pattern."""
    from PIL import Image

    for split, n in (("train", n_train), ("test", n_test)):
        for c, name in enumerate("abc"):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(n):
                base = np.zeros((size, size, 3))
                base[:, :, c] = np.linspace(0, 1, size)[None, :] if c != 1 else np.linspace(0, 1, size)[:, None]
                pixels = np.clip(200 * base + rng.integers(0, 56, (size, size, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{i:03d}.png")


def _read_scores(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_score_images_and_export_of_an_image_folder_run(tmp_path, capsys):
    """A run on PNG files (the Pillow pipeline, resized 12 -> 16): `score --images`
    equals scoring its test split through the dataset, and so does its ONNX
    export on the same files' pixels."""
    from PIL import Image

    root, run = tmp_path / "data", tmp_path / "run"
    _write_image_folder(root, np.random.default_rng(0))
    assert main(["train", "--data", "image_folder", "--root", str(root), "--normal-class", "1", "--ratio", "0.5",
                 "--image-size", "16", "--epochs", "1", "--lr", "1e-3", "--verbose", "0", "--output", str(run)]) == 0
    assert main(["score", str(run), "--split", "test", "--output", str(tmp_path / "split.csv")]) == 0
    assert main(["score", str(run), "--images", str(root / "test"), "--output", str(tmp_path / "files.csv")]) == 0
    by_split, by_files = _read_scores(tmp_path / "split.csv"), _read_scores(tmp_path / "files.csv")
    assert [row["file"] for row in by_files] == sorted(str(p) for p in (root / "test").rglob("*.png"))
    reference = np.array([float(row["dissimilarity"]) for row in by_split])
    np.testing.assert_allclose([float(row["dissimilarity"]) for row in by_files], reference, rtol=1e-6)
    assert [row["prediction"] for row in by_files] == [row["prediction"] for row in by_split]

    capsys.readouterr()
    assert main(["export", str(run), "--input-dtype", "uint8"]) == 0
    assert "RGB images (N, 3, H, W) of any size (resized to 16x16)" in capsys.readouterr().out
    pixels = np.stack([np.asarray(Image.open(row["file"])).transpose(2, 0, 1) for row in by_files])
    session = ort.InferenceSession(str(run / "model.onnx"))
    np.testing.assert_allclose(session.run(None, {"images": pixels})[0], reference, rtol=RTOL, atol=ATOL)
    assert main(["export", str(run), "--format", "torchscript"]) == 0
    scorer = _torchscript(run / "model.torchscript.pt")
    np.testing.assert_allclose(scorer(torch.from_numpy(pixels))[0].numpy(), reference, rtol=RTOL, atol=ATOL)


def test_score_images_refuses_images_of_another_size(tmp_path, capsys):
    from PIL import Image

    run = tmp_path / "run"
    assert main(["train", "--epochs", "0", "--frozen", "--verbose", "0", "--output", str(run)]) == 0
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "ok.png")
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / "big.png")
    (tmp_path / "notes.png").write_text("not an image")
    capsys.readouterr()
    assert main(["score", str(run), "--images", str(tmp_path / "ok.png"), str(tmp_path / "big.png")]) == 2
    assert "big.png is 28x28 pixels; the model expects grey images (N, 1, 8, 8)" in capsys.readouterr().err
    assert main(["score", str(run), "--images", str(tmp_path / "notes.png")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["score", str(run), "--images", str(tmp_path / "ok.png")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "file,dissimilarity,p_value,prediction"


def test_export_refuses_unknown_formats(trained, tmp_path):
    with pytest.raises(ValueError, match="format must be one of"):
        trained.export(tmp_path / "m.x", format="tflite")
    with pytest.raises(ValueError, match="input_dtype must be one of"):
        trained.export(tmp_path / "m.onnx", input_dtype="float16")


def test_the_optional_packages_are_optional(trained, tmp_path):
    """dlmsvdd, dlmsvdd_ext and the command import without onnx, onnxruntime and
    tensorboard; an ONNX export then says what to install."""
    script = ("import sys\n"
              "for name in ('onnx', 'onnxscript', 'onnxruntime', 'tensorboard'): sys.modules[name] = None\n"
              "import dlmsvdd, dlmsvdd_ext\nfrom dlmsvdd.cli import build_parser, main\nbuild_parser()\n"
              f"sys.exit(main(['export', {str(tmp_path / 'model.pt')!r}]))\n")
    trained.save(tmp_path / "model.pt")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 2, done.stderr
    assert "ONNX export needs the export extra: pip install 'dlmsvdd[export]'" in done.stderr


def test_checkpoints_without_a_preprocessing_record_score_but_do_not_export(trained, task, tmp_path):
    trained.save(tmp_path / "model.pt")
    state = torch.load(tmp_path / "model.pt", weights_only=True)
    del state["preprocessing"]  # as checkpoints were written before the record was kept
    torch.save(state, tmp_path / "old.pt")
    old = DLMSVDD.load(tmp_path / "old.pt")
    np.testing.assert_array_equal(old.dissimilarity(task.test), trained.dissimilarity(task.test))
    with pytest.raises(ValueError, match="holds no preprocessing record"):
        old.export(tmp_path / "old.onnx")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    assert loaded.preprocessing_ == trained.preprocessing_ == task.train.preprocessing


def _spoiled(raw_test):
    """Five images the scorer must not call normal, then five good ones: a NaN, +inf and -inf pixel; pixels
    0-255 given as floats (unscaled); one pixel just below 0."""
    images = raw_test[:10].clone()
    images[0, 0, 3, 3], images[1, 0, 0, 0], images[2, 0, 4, 4] = float("nan"), float("inf"), -float("inf")
    images[3] *= 255
    images[4, 0, 1, 1] = -0.01
    return images


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_unreadable_or_out_of_range_images_are_never_called_normal(fmt, trained, raw_test, tmp_path):
    """Before: a NaN pixel gave dissimilarity nan and decision +1 (NaN >= threshold is false), and float
    pixels 0-255 were scored as if they were in [0, 1]."""
    images = _spoiled(raw_test)
    path = trained.export(tmp_path / "m", format=fmt)
    if fmt == "onnx":
        f, decision, p = ort.InferenceSession(str(path)).run(None, {"images": images.numpy()})
    else:
        f, decision, p = (t.numpy() for t in _torchscript(path)(images))
    assert np.isnan(p[:5]).all()  # no p-value either
    assert np.isnan(f[:5]).all()  # no number for an image the scorer does not take
    np.testing.assert_array_equal(decision[:5], -1)
    good = images[5:]  # raw images: every entry point preprocesses them
    np.testing.assert_allclose(f[5:], trained.dissimilarity(good), rtol=RTOL, atol=ATOL)
    _assert_decisions(decision[5:], trained.dissimilarity(good), trained.threshold_, trained.predict(good))


def test_any_non_finite_dissimilarity_is_an_anomaly(trained):
    """The decision rule itself, scripted: f NaN or infinite is -1 whatever the threshold, also for uint8 images
    (no pixel of which is out of range) when the network or boundary overflows."""
    from dlmsvdd.training.export import build_scorer

    class Fixed(torch.nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1e30])[: z.shape[0]]

    scorer = build_scorer(trained)
    scorer.boundary = Fixed()
    scorer.threshold = 1e300
    scripted = torch.jit.script(scorer)
    for images in (torch.zeros(5, 1, 8, 8), torch.zeros(5, 1, 8, 8, dtype=torch.uint8)):
        f, decision, _ = scripted(images)
        assert decision.tolist() == [-1, -1, -1, 1, 1]


def test_torchscript_refuses_other_dtypes_and_onnx_takes_its_own(trained, raw_test, tmp_path):
    """Before: int64 pixels 0-255 went in unscaled (every image anomalous), float64 and bool as floats."""
    scorer = _torchscript(trained.export(tmp_path / "m.pt", format="torchscript"))
    pixels = (raw_test[:4] * 255).round()
    for bad in (pixels.long(), pixels.int(), raw_test[:4].double(), raw_test[:4] > 0.5):
        name = str(bad.dtype).removeprefix("torch.")
        with pytest.raises(Exception, match=rf"got images of dtype {name}; the model expects grey images \(N, 1, 8, 8\)"
                                            r".*\(dtype uint8 or float32\)"):
            scorer(bad)
    float_session = ort.InferenceSession(str(trained.export(tmp_path / "f.onnx")))
    uint8_session = ort.InferenceSession(str(trained.export(tmp_path / "u.onnx", input_dtype="uint8")))
    for session, bad in ((float_session, pixels.to(torch.uint8)), (float_session, raw_test[:4].double()),
                         (uint8_session, raw_test[:4])):
        with pytest.raises(Exception, match="Unexpected input data type"):
            session.run(None, {"images": bad.numpy()})


def test_a_model_fitted_on_unscaled_float_arrays_exports_any_finite_float(tmp_path):
    """Its preprocessing record is the identity (floats went to the network as they were): no [0, 1] range."""
    X = datasets.digits().train.images[:120].numpy() * 255  # float pixels 0-255
    model = DLMSVDD(_config(epochs=0, frozen=True, nu=1)).fit(X)  # all normal: one-class SVDD
    assert "any finite float" in model.stored_preprocessing().expects()
    for fmt in ("onnx", "torchscript"):
        path = model.export(tmp_path / f"m.{fmt}", format=fmt)
        if fmt == "onnx":
            f = ort.InferenceSession(str(path)).run(None, {"images": X[:20]})[0]
        else:
            f = _torchscript(path)(torch.from_numpy(X[:20]))[0].numpy()
        np.testing.assert_allclose(f, model.dissimilarity(X[:20]), rtol=RTOL, atol=ATOL)
