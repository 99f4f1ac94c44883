"""Images held as arrays (``datasets.image_arrays``): an .npz file or a folder of .npy files, every
layout and dtype, against the arrays the tests write; CIFAR-10 and Fashion-MNIST from the fetch
script's file names; the errors; a run through ``dlmsvdd train`` and a sweep."""

import json

import numpy as np
import pytest
import torch

from dlmsvdd import datasets, tasks
from dlmsvdd.cli import main

RNG = np.random.default_rng(0)


def _arrays(n_train=48, n_test=24, shape=(12, 12), dtype=np.uint8, classes=3):
    make = (lambda s: RNG.integers(0, 256, s, dtype=np.uint8)) if dtype == np.uint8 else (
        lambda s: RNG.random(s).astype(dtype))
    return {"X_train": make((n_train, *shape)), "y_train": np.arange(n_train) % classes,
            "X_test": make((n_test, *shape)), "y_test": np.arange(n_test) % classes}


def _npz(path, arrays):
    np.savez(path, **arrays)
    return path


# layout of the arrays as written -> how to make them (N, C, H, W)
LAYOUTS = {"NHW": ((12, 12), lambda a: a[:, None]), "NHWC": ((12, 12, 3), lambda a: a.transpose(0, 3, 1, 2)),
           "NHWC grey": ((12, 12, 1), lambda a: a.transpose(0, 3, 1, 2)), "NCHW": ((3, 12, 12), lambda a: a),
           "NCHW grey": ((1, 12, 12), lambda a: a)}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_every_layout_and_dtype_gives_the_arrays_pixels(tmp_path, layout, dtype):
    shape, to_nchw = LAYOUTS[layout]
    arrays = _arrays(shape=shape, dtype=dtype)
    source = datasets.load("image_arrays", _npz(tmp_path / "images.npz", arrays))
    expected = to_nchw(arrays["X_train"])
    pixels = expected / 255.0 if dtype == np.uint8 else expected.astype(np.float64)
    assert source.name == "image_arrays" and source.channels == expected.shape[1] and source.image_size == 12
    assert source.classes == [0, 1, 2] and len(source.test) == 24
    np.testing.assert_array_equal(source.train_labels, arrays["y_train"])
    # the training pool's own statistics, per channel, normalise the network's inputs
    mean, std = pixels.mean(axis=(0, 2, 3)), pixels.std(axis=(0, 2, 3))
    np.testing.assert_allclose(source.stats[0], mean, rtol=1e-6)
    np.testing.assert_allclose(source.stats[1], std, rtol=1e-5)
    task = tasks.make_task(source, 1, ratio=0.5, seed=0)
    rows = task.train.split.indices[:5]
    inputs, targets = task.train.take(np.arange(5))
    reference = (pixels[rows] - mean[None, :, None, None]) / std[None, :, None, None]
    np.testing.assert_allclose(inputs.numpy(), reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(targets.numpy(), task.train.targets[:5])
    assert torch.equal(torch.stack([task.train[i][0] for i in range(5)]), inputs)  # row by row: the same inputs
    assert task.train.augmented() is task.train  # a user's arrays: no augmentation unless the data set has one


def test_a_folder_of_npy_files_is_the_npz(tmp_path):
    arrays = _arrays(shape=(10, 10, 3))
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    folder = datasets.image_arrays(tmp_path)
    packed = datasets.image_arrays(_npz(tmp_path / "all.npz", arrays))
    assert torch.equal(folder.train.images, packed.train.images) and torch.equal(folder.test.images, packed.test.images)
    assert folder.train.images.dtype == torch.uint8  # pixels stay bytes in memory
    np.testing.assert_array_equal(folder.test_labels, arrays["y_test"])


def test_cifar10_and_fashion_mnist_from_the_fetch_scripts_files(tmp_path):
    colour = _arrays(shape=(32, 32, 3), classes=10, n_train=40, n_test=20)
    _npz(tmp_path / "cifar10.npz", colour)
    cifar = datasets.load("cifar10", tmp_path)
    assert cifar.name == "cifar10" and cifar.classes[3] == "cat" and cifar.stats is None  # STATS["cifar10"] apply
    task = tasks.make_task(cifar, 3, ratio=0.5, seed=0)
    assert task.class_name == "cat" and task.train.augmented().batch_augment.kind == "crop_flip"
    image, label = cifar.train[7]
    assert torch.equal(image, torch.from_numpy(colour["X_train"][7]).permute(2, 0, 1)) and label == 7
    grey = _arrays(shape=(28, 28), classes=10, n_train=40, n_test=20)
    _npz(tmp_path / "fashion_mnist.npz", grey)
    fashion = datasets.load("fashion_mnist", tmp_path)
    assert fashion.classes[0] == "T-shirt/top" and fashion.channels == 1 and fashion.image_size == 28
    mean, std = datasets.STATS["fashion_mnist"]
    x, _ = tasks.make_task(fashion, 0, ratio=0.5, seed=0).test[4]
    np.testing.assert_allclose(x[0].numpy(), (grey["X_test"][4] / 255 - mean[0]) / std[0], rtol=1e-5, atol=1e-6)


def test_the_arrays_are_checked_with_messages_that_say_what_to_do(tmp_path):
    def refused(match, **changes):
        arrays = {**_arrays(), **changes}
        with pytest.raises(ValueError, match=match):
            datasets.image_arrays(_npz(tmp_path / "bad.npz", {k: v for k, v in arrays.items() if v is not None}))

    refused(r"lacks the arrays \['y_test'\]", y_test=None)
    refused("int32 values.*uint8", X_train=np.zeros((48, 12, 12), dtype=np.int32))
    refused(r"floats in \[0, 255\].*divide", X_train=np.linspace(0, 255, 48 * 144).reshape(48, 12, 12))
    refused("NaN", X_test=np.full((24, 12, 12), np.nan))
    refused("one class per image of X_train", y_train=np.zeros(5, dtype=int))
    refused("y_test must hold classes as non-negative integers", y_test=np.zeros(24))
    refused("cannot be told apart", X_train=np.zeros((48, 3, 5, 3), dtype=np.uint8))
    refused(r"must hold images \(N, H, W\)", X_train=np.zeros((48, 12), dtype=np.uint8))
    refused("same", X_test=np.zeros((24, 10, 10), dtype=np.uint8))
    refused("square", X_train=np.zeros((48, 12, 10), dtype=np.uint8), X_test=np.zeros((24, 12, 10), dtype=np.uint8))
    with pytest.raises(ValueError, match="no data at .*an .npz file holding X_train"):
        datasets.image_arrays(tmp_path / "empty_folder_that_does_not_exist")
    (tmp_path / "folder").mkdir()
    np.save(tmp_path / "folder" / "X_train.npy", np.zeros((4, 8, 8), dtype=np.uint8))
    with pytest.raises(ValueError, match="absent: y_train.npy, X_test.npy, y_test.npy"):
        datasets.image_arrays(tmp_path / "folder")
    np.save(tmp_path / "folder" / "y_train.npy", np.array([object()] * 4))  # a pickle is never loaded
    for name in ("X_test", "y_test"):
        np.save(tmp_path / "folder" / f"{name}.npy", np.zeros((4, 8, 8) if name == "X_test" else 4, dtype=np.uint8))
    with pytest.raises(ValueError, match="without pickles"):
        datasets.image_arrays(tmp_path / "folder")
    with pytest.raises(ValueError, match="needs a data root.*npz"):
        datasets.load("image_arrays")


def test_image_layout_decides_by_the_channel_axis_then_by_square_images():
    assert datasets.image_layout((5, 28, 28)) == "NHW"
    assert datasets.image_layout((5, 32, 32, 3)) == "NHWC" and datasets.image_layout((5, 3, 32, 32)) == "NCHW"
    assert datasets.image_layout((5, 3, 3, 3)) == "NCHW"  # both square: channels first, torch's own layout
    assert datasets.image_layout((5, 3, 3, 1)) == "NHWC"


def test_dlmsvdd_train_and_sweep_read_image_arrays(tmp_path, capsys):
    path = _npz(tmp_path / "images.npz", _arrays(n_train=60, n_test=30, shape=(8, 8, 3)))
    flags = ["--data", "image_arrays", "--root", str(path), "--normal-class", "2", "--ratio", "0.5", "--epochs", "1",
             "--batch-size", "16", "--verbose", "0"]
    assert main(["train", *flags, "--output", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["task_summary"]["test_normal"] == 10 and metrics["task_summary"]["test_anomalous"] == 20
    (tmp_path / "grid.yaml").write_text(json.dumps({"base": {"data": "image_arrays", "root": str(path), "epochs": 1,
                                                             "batch_size": 16, "ratio": 0.5},
                                                    "grid": {"normal_class": [0, 1]}}))
    assert main(["sweep", str(tmp_path / "grid.yaml"), "--output", str(tmp_path / "sweep"), "--verbose", "0"]) == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "sweep").glob("*/result.json")]
    assert len(records) == 2 and all(r["status"] == "done" for r in records)
