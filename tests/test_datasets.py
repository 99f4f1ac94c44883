"""The torchvision data-set paths, ImageNet-LT split files and ImageFolder, on
small files the tests write in the real formats."""

import pickle
import struct

import numpy as np
import pytest
import torch

from PIL import Image

from dlmsvdd import datasets, tasks
from dlmsvdd.experiments import runs as run
from dlmsvdd.training.config import TrainConfig

RNG = np.random.default_rng(0)


def _idx(path, array, magic):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(np.uint8).tobytes())


@pytest.fixture
def fashion_root(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", 60), ("t10k", 30)):
        _idx(raw / f"{prefix}-images-idx3-ubyte", RNG.integers(0, 256, (n, 28, 28)), 0x803)
        _idx(raw / f"{prefix}-labels-idx1-ubyte", np.arange(n) % 3, 0x801)
    return tmp_path


def _pickle(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f)


@pytest.fixture
def unchecked_cifar(monkeypatch):
    """Our files are real CIFAR pickles but not the published ones: skip only torchvision's md5 comparison."""
    import torchvision.datasets.cifar as cifar

    monkeypatch.setattr(cifar.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(cifar, "check_integrity", lambda path, md5=None: True)


@pytest.fixture
def cifar10_root(tmp_path, unchecked_cifar):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i in range(1, 6):
        _pickle(folder / f"data_batch_{i}", {"data": RNG.integers(0, 256, (8, 3072), dtype=np.uint8),
                                              "labels": [(i + j) % 4 for j in range(8)]})
    _pickle(folder / "test_batch", {"data": RNG.integers(0, 256, (12, 3072), dtype=np.uint8),
                                    "labels": [j % 4 for j in range(12)]})
    _pickle(folder / "batches.meta", {"label_names": ["airplane", "automobile", "bird", "cat"]})
    return tmp_path


@pytest.fixture
def cifar100_root(tmp_path, unchecked_cifar):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    for name, n in (("train", 40), ("test", 20)):
        fine = np.arange(n) % 10
        _pickle(folder / name, {"data": RNG.integers(0, 256, (n, 3072), dtype=np.uint8),
                                "fine_labels": fine.tolist(), "coarse_labels": (fine // 5).tolist()})
    _pickle(folder / "meta", {"fine_label_names": [f"fine{i}" for i in range(10)],
                              "coarse_label_names": ["coarse0", "coarse1"]})
    return tmp_path


def _image(path, size=(20, 16)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(RNG.integers(0, 256, (*size[::-1], 3), dtype=np.uint8)).save(path)


def test_fashion_mnist(fashion_root):
    source = datasets.load("fashion_mnist", fashion_root)
    assert len(source.train) == 60 and len(source.test) == 30
    np.testing.assert_array_equal(source.train_labels, np.arange(60) % 3)
    task = tasks.make_task(source, 1, ratio=0.5, seed=0)
    x, t = task.train[0]
    assert x.shape == (1, 28, 28) and t in (1, -1)
    assert task.train.augmented() is task.train  # no augmentation for Fashion-MNIST
    rgb = tasks.make_task(source, 1, ratio=0.5, channels=3, image_size=64, imagenet_stats=True)
    assert rgb.test[0][0].shape == (3, 64, 64)
    # the pixels are the file's, normalised by the data set's statistics
    img, _ = source.train[int(task.train.split.indices[0])]
    mean, std = datasets.STATS["fashion_mnist"]
    np.testing.assert_allclose(x[0].numpy(), (np.asarray(img) / 255.0 - mean[0]) / std[0], rtol=1e-5, atol=1e-6)


def test_cifar10_with_crop_and_flip(cifar10_root):
    source = datasets.load("cifar10", cifar10_root)
    assert len(source.train) == 40 and source.classes[:2] == ["airplane", "automobile"]
    task = tasks.make_task(source, 2, ratio=0.75, seed=1)
    assert task.class_name == "bird"
    assert np.all(source.train_labels[task.train.split.indices[task.train.targets == 1]] == 2)
    x, _ = task.train[0]
    assert x.shape == (3, 32, 32)
    torch.manual_seed(0)
    augmented = torch.stack([task.train.augmented()[0][0] for _ in range(8)])
    assert not all(torch.equal(a, x) for a in augmented)  # crops and flips change the image


def test_cifar100_coarse_by_default_fine_on_request(cifar100_root):
    coarse = datasets.load("cifar100", cifar100_root)
    fine = datasets.load("cifar100", cifar100_root, fine_labels=True)
    np.testing.assert_array_equal(coarse.train_labels, (np.arange(40) % 10) // 5)
    np.testing.assert_array_equal(fine.train_labels, np.arange(40) % 10)
    assert coarse.classes == ["coarse0", "coarse1"] and len(fine.classes) == 10
    assert coarse.train[3][1] == 0 and coarse.train[7][1] == 1  # items carry the coarse label too


def _imagenet_lt_tree(root, train_counts, test_per_class):
    """ImageNet-LT split files over small random JPEGs: class c has train_counts[c]
    training images and test_per_class test images."""
    lines = {"train": [], "test": []}
    for c, n in enumerate(train_counts):
        for i in range(n):
            lines["train"].append(f"train/n0{c}/img{i}.JPEG {c}")
            _image(root / f"train/n0{c}/img{i}.JPEG")
        for i in range(test_per_class):
            lines["test"].append(f"val/v{c}_{i}.JPEG {c}")
            _image(root / f"val/v{c}_{i}.JPEG")
    for split, text in lines.items():
        (root / f"ImageNet_LT_{split}.txt").write_text("\n".join(text) + "\n")
    return root


def test_imagenet_lt_split_files(tmp_path):
    root = _imagenet_lt_tree(tmp_path / "imagenet", train_counts=(6, 5, 4), test_per_class=2)
    source = datasets.load("imagenet_lt", root)
    assert source.train_labels.tolist() == [0] * 6 + [1] * 5 + [2] * 4 and len(source.test) == 6
    image, label = source.train[7]
    assert image.size == (20, 16) and image.mode == "RGB" and label == 1
    task = tasks.make_task(source, 0, ratio=None, seed=0, image_size=32)
    assert task.train[0][0].shape == (3, 32, 32)
    assert (task.test.targets == 1).sum() == 2
    (root / "ImageNet_LT_train.txt").write_text("train/n00/img0.JPEG\n")
    with pytest.raises(ValueError, match="expected 'path label'"):
        datasets.load("imagenet_lt", root)


def test_image_folder_both_layouts(tmp_path):
    for split in ("train", "test"):
        for c in ("cat", "dog"):
            for i in range(5):
                _image(tmp_path / "split" / split / c / f"{i}.png")
                _image(tmp_path / "single" / c / f"{split}{i}.png")
    split = datasets.load("image_folder", tmp_path / "split")
    single = datasets.load("image_folder", tmp_path / "single")
    assert split.classes == ["cat", "dog"] and len(split.train) == 10 and len(split.test) == 10
    assert len(single.train) + len(single.test) == 20 and set(single.test_labels) == {0, 1}
    task = tasks.make_task(single, 1, ratio=0.5, seed=0)
    assert task.train[0][0].shape == (3, 224, 224)  # natural images are resized to one size


def test_missing_or_empty_root_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        datasets.load("cifar10", tmp_path / "nowhere")
    with pytest.raises(ValueError, match="cifar-10-batches-py"):
        datasets.load("cifar10", tmp_path)
    with pytest.raises(ValueError, match="needs a data root"):
        datasets.load("fashion_mnist")
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.load("mnist", tmp_path)


def test_a_training_run_on_cifar_files(cifar10_root, tmp_path):
    cfg = TrainConfig(data="cifar10", root=str(cifar10_root), normal_class=0, ratio=0.5, backbone="small_cnn",
                      weights=None, epochs=2, batch_size=8, verbose=0, output=str(tmp_path / "run"))
    model, result, folder = run.train(cfg)
    assert 0 <= result["test"]["auroc"] <= 1 and result["task_summary"]["test_normal"] == 3
    assert {"config.yaml", "metrics.json", "history.json", "convergence.png", "roc.png", "model.pt",
            "log.txt"} <= {p.name for p in folder.iterdir()}


def test_imagenet_lt_preset_end_to_end_with_shot_groups(tmp_path):
    """The imagenet-lt preset on a tiny ImageNet-LT tree whose three classes are
    many- (110 training images), medium- (30) and few-shot (10): the sweep runs and
    the report puts each detector's balanced accuracy in its group."""
    from dlmsvdd.experiments import presets, tables
    from dlmsvdd.experiments.sweep_report import write_report

    root = _imagenet_lt_tree(tmp_path / "imagenet", train_counts=(110, 30, 10), test_per_class=4)
    preset = presets.load("imagenet-lt", overrides={
        "root": str(root), "weights": None, "backbone": "small_cnn", "image_size": 32, "epochs": 1,
        "batch_size": 32, "normal_class": [0, 1, 2]})
    records = preset.run(tmp_path / "sweep", progress=False)
    assert [r["status"] for r in records] == ["done"] * 3
    write_report(tmp_path / "sweep")
    table = tables.long_tailed_table(tables.load_records(tmp_path / "sweep"))
    assert table.columns == ["imagenet_lt many", "imagenet_lt medium", "imagenet_lt few", "imagenet_lt all"]
    (method,) = table.rows
    bacc = [r["test"]["balanced_accuracy"] for r in records]
    for group, value in zip(("many", "medium", "few"), bacc):
        assert table.cells[method, f"imagenet_lt {group}"].mean == pytest.approx(value)
    assert table.cells[method, "imagenet_lt all"].mean == pytest.approx(np.mean(bacc))
    assert "imagenet_lt few" in (tmp_path / "sweep" / "long_tailed.md").read_text()
