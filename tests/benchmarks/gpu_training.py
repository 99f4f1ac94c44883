"""DLM-SVDD training on a GPU (issue 47), each measurement beside its baseline in the same process.

* ``omega_rows``: the omega-step's training images per second with ResNet-18 on 32x32 images
  (6000 CIFAR-sized images, batch 128, Adam) against a plain torch loop of the same network, batch
  size and optimiser on data already on the GPU (forward, a loss, backward, step: the floor for that
  network), at each precision option (``TrainConfig.precision``, ``channels_last``).
* ``demo_rows``: the digits demo's configuration fitted on the GPU and on the CPU of the same machine,
  with the epoch's phases and the fit's top CUDA/CPU operations (torch.profiler) on the GPU.
* ``auroc_rows``: the precision options' test AUROC and fit time on a real task (Fashion-MNIST,
  class 0, ratio 0.1, ResNet-18 from scratch), given the data file's folder.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks
from dlmsvdd.training import precision
from dlmsvdd.training.models import FeatureNet, build_backbone

OPTIONS = [("float32", False), ("tf32", False), ("tf32", True), ("bf16", True)]
# GPU_BENCH_DEVICE=cpu: a dry run of the same code at small sizes, on a machine without a GPU
DEVICE = os.environ.get("GPU_BENCH_DEVICE", "cuda")
DRY = DEVICE == "cpu"


def _emit(row: dict) -> dict:
    """A row printed as soon as it is measured (a run cut short keeps what it measured)."""
    print("ROW", {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    return row


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def cifar_sized(n_normal: int = 300 if DRY else 5000, n_anomalous: int = 60 if DRY else 1000, seed: int = 0):
    """32x32x3 images: normal ones around one colour pattern, anomalies around another; 80/20 split."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.rand(2, 3, 32, 32, generator=g)
    labels = torch.cat([torch.ones(n_normal), -torch.ones(n_anomalous)]).long()
    images = (0.6 * patterns[(labels < 0).long()] + 0.4 * torch.rand(len(labels), 3, 32, 32, generator=g)).clamp(0, 1)
    order = torch.randperm(len(labels), generator=g)
    images, labels = images[order], labels[order]
    cut = int(0.8 * len(labels))
    return TensorDataset(images[:cut], labels[:cut]), TensorDataset(images[cut:], labels[cut:])


def ours(train, val, option, epochs: int = 2 if DRY else 3, batch_size: int = 128) -> float:
    """Images per second of DLMSVDD's omega-step (median over the epochs after the first)."""
    prec, channels_last = option
    model = DLMSVDD(TrainConfig(backbone="resnet18", weights=None, epochs=epochs, kernel="exact", batch_size=batch_size,
                                device=DEVICE, precision=prec, channels_last=channels_last, verbose=0, seed=0))
    model.fit(train, val)
    seconds = statistics.median(row["seconds_omega"] for row in model.history_[1:epochs])
    return (len(train) // batch_size) * batch_size / seconds


def floor(train, option, epochs: int = 2 if DRY else 3, batch_size: int = 128, lr: float = 1e-3) -> float:
    """Images per second of a plain loop: the same network (ResNet-18 and the feature head), batch
    size and optimiser, the images on the GPU, no boundary (median over the epochs after the first)."""
    prec, channels_last = option
    torch.manual_seed(0)
    network = FeatureNet(build_backbone("resnet18", None, 3)[0]).to(DEVICE)
    memory = torch.channels_last if channels_last else torch.contiguous_format
    network.to(memory_format=memory)
    optimizer = torch.optim.Adam(network.parameters(), lr=lr, weight_decay=1e-4)
    images = train.tensors[0].to(DEVICE).contiguous(memory_format=memory)
    n = images.shape[0] // batch_size * batch_size
    network.train()
    seconds = []
    for _ in range(epochs):
        order = torch.randperm(images.shape[0], device=DEVICE)
        _sync()
        start = time.perf_counter()
        for b in range(0, n, batch_size):
            x = images[order[b:b + batch_size]]
            with precision.omega_step(prec, torch.device(DEVICE)):
                with precision.network_autocast(prec, torch.device(DEVICE)):
                    z = network(x)
                loss = z.float().square().sum(1).mean()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        _sync()
        seconds.append(time.perf_counter() - start)
    return n / statistics.median(seconds[1:])


def omega_rows(options=OPTIONS) -> list[dict]:
    train, val = cifar_sized()
    rows = []
    for option in options:
        floor_rate, our_rate = floor(train, option), ours(train, val, option)
        rows.append(_emit({"measure": "omega-step images/s, ResNet-18 32x32, batch 128", "precision": option[0],
                           "channels_last": option[1], "ours": our_rate, "plain_loop": floor_rate,
                           "ratio": our_rate / floor_rate}))
    return rows


def demo_rows(profile: bool = True) -> list[dict]:
    """The demo's configuration (digits, class 3, ratio 0.1, the small CNN, 30 epochs) on each device."""
    task = tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)
    rows = []
    for device in ("cpu",) if DRY else ("cuda", "cpu"):
        config = TrainConfig(backbone="small_cnn", weights=None, verbose=0, device=device, seed=0,
                             epochs=2 if DRY else 30)
        DLMSVDD(config.__class__(**{**config.to_dict(), "epochs": 1})).fit(task.train, task.val)  # warm-up
        _sync()
        start = time.perf_counter()
        model = DLMSVDD(config).fit(task.train, task.val)
        _sync()
        seconds = time.perf_counter() - start
        phases = {k: sum(row.get(k, 0.0) for row in model.history_)
                  for k in ("seconds_features", "seconds_alpha", "seconds_solve", "seconds_build", "seconds_omega")}
        rows.append(_emit({"measure": "digits demo fit", "device": device, "threads": torch.get_num_threads(),
                           "seconds": seconds, "auroc": model.evaluate(task.test)["auroc"], **phases}))
    if profile and not DRY:
        from torch.profiler import ProfilerActivity, profile as torch_profile
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            DLMSVDD(TrainConfig(backbone="small_cnn", weights=None, verbose=0, device="cuda", seed=0,
                                epochs=3)).fit(task.train, task.val)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15), flush=True)
    return rows


def auroc_rows(root, options=(("tf32", False), ("bf16", True)),
               epochs: int = 1 if DRY else 6) -> list[dict]:
    """Fashion-MNIST class 0 at ratio 0.1, ResNet-18 from scratch, each precision option."""
    root = Path(root)
    with np.load(root / "fashion_mnist.npz") as data:
        train_x, train_y, test_x, test_y = (data[k] for k in ("X_train", "y_train", "X_test", "y_test"))
    from dlmsvdd.data.sources import Source, TensorImages
    to_images = lambda x: torch.from_numpy(x).float().div_(255)[:, None]  # noqa: E731
    source = Source("fashion_mnist", TensorImages(to_images(train_x), train_y), TensorImages(to_images(test_x), test_y),
                    train_y, test_y, [str(c) for c in range(10)], 1, 28)
    task = tasks.make_task(source, normal_class=0, ratio=0.1, seed=0, channels=1 if DRY else 3)  # ResNets take RGB
    rows = []
    for prec, channels_last in options:
        _sync()
        start = time.perf_counter()
        model = DLMSVDD(TrainConfig(backbone="small_cnn" if DRY else "resnet18", weights=None, epochs=epochs,
                                    device=DEVICE, seed=0,
                                    precision=prec, channels_last=channels_last, verbose=0)).fit(task.train, task.val)
        _sync()
        rows.append(_emit({"measure": f"Fashion-MNIST class 0, ratio 0.1, ResNet-18, {epochs} epochs", "precision": prec,
                           "channels_last": channels_last, "fit_seconds": time.perf_counter() - start,
                           "test_auroc": model.evaluate(task.test)["auroc"]}))
    return rows
