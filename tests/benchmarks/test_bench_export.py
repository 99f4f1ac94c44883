"""Scoring throughput of the exported ONNX scorer (onnxruntime) against
DLMSVDD.dissimilarity, same process, same batch, interleaved.

    pytest tests/benchmarks/test_bench_export.py -o addopts="" --benchmark-only -s

The ONNX model takes the raw batch and runs everything (preprocessing,
network, kernel boundary, threshold); ``dissimilarity`` is given the batch
already preprocessed (as a dataset hands it over) and runs the network in
torch and the boundary on the compiled kernels. Each call waits 0.3 s first
(``time_interleaved(settle=)``): onnxruntime's and OpenMP's idle threads spin
for a while after a call and would take a core from the next.
"""

import time

import numpy as np
import onnxruntime as ort
import pytest
import torch

from dlmsvdd import DLMSVDD, TrainConfig, datasets, tasks
from dlmsvdd.experiments.kernel_bench import time_interleaved

BATCH = 256
CASES = {  # name: (config values, image size)
    "small CNN, 8x8 grey, exact": (dict(backbone="small_cnn", kernel="exact"), None),
    "small CNN, 8x8 grey, nystrom m=256": (dict(backbone="small_cnn", kernel="nystrom", n_components=256), None),
    "ResNet-18, 64x64 RGB, exact": (dict(backbone="resnet18", kernel="exact"), 64),
}


def _fitted(values: dict, image_size):
    source = datasets.digits()
    channels = 3 if values["backbone"] == "resnet18" else 1
    task = tasks.make_task(source, normal_class=3, ratio=None, seed=0, channels=channels, image_size=image_size)
    config = TrainConfig(**values, weights=None, frozen=True, epochs=0, batch_size=BATCH, verbose=0)
    model = DLMSVDD(config).fit(task.train, task.val)  # frozen: the boundary on the initial network
    raw = source.test.images[task.test.split.indices[:BATCH]]
    return model, raw, len(task.train)


@pytest.mark.parametrize("case", CASES)
def test_onnx_against_dissimilarity(case, benchmark, tmp_path):
    values, image_size = CASES[case]
    model, raw, n_train = _fitted(values, image_size)
    session = ort.InferenceSession(str(model.export(tmp_path / "m.onnx")))
    images, inputs = raw.numpy(), model.preprocess(raw)
    f_onnx, f_model = session.run(None, {"images": images})[0], model.dissimilarity(inputs)
    # float32 rounding of the features (1e-7) reaches f amplified by gamma: a sanity bound here, the parity
    # itself is tests/test_export.py's
    np.testing.assert_allclose(f_onnx, f_model, rtol=1e-4)
    worst = float(np.max(np.abs(f_onnx - f_model) / np.abs(f_model)))
    t = time_interleaved({"onnx": lambda: session.run(None, {"images": images}),
                          "dissimilarity": lambda: model.dissimilarity(inputs)}, rounds=7, warm=True, settle=0.3)
    rate = {name: BATCH / seconds for name, seconds in t.items()}
    print(f"\n{case} ({n_train} training images, gamma {model.svdd_.gamma_:.3g}, {torch.get_num_threads()} torch "
          f"threads): batch {BATCH}, ONNX {rate['onnx']:.0f} images/s, DLMSVDD.dissimilarity "
          f"{rate['dissimilarity']:.0f} images/s, ratio {rate['onnx'] / rate['dissimilarity']:.2f}; "
          f"largest relative difference of the scores {worst:.1e}")
    benchmark.extra_info.update({f"{k}_images_per_s": v for k, v in rate.items()})
    def settled():  # untimed: idle threads of the last call stop spinning first (as time_interleaved's settle)
        time.sleep(0.3)
        return (None, {"images": images}), {}

    benchmark.pedantic(session.run, setup=settled, rounds=7)  # the exported scorer's batch
