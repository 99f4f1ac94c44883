"""A trained DLMSVDD as one self-contained scorer for deployment: raw images
in, (dissimilarity, decision, p_value) out, written as ONNX or TorchScript.

The scorer holds the preprocessing the model was trained with
(``dlmsvdd.data.preprocessing.Preprocess``: shape check, uint8 scaling,
channels, resize, normalisation), the network (backbone and L2 normalisation)
in eval mode, the kernel boundary in plain torch operations
(``dlmsvdd_ext.portable``: support features and weights, or the feature map
and ``Z^T a``), a vector model's input consensus (``dlmsvdd.training.input_consensus``)
and the threshold. Nothing of dlmsvdd is needed to run it: an
ONNX runtime, or torch alone for TorchScript.

Input: raw images, uint8 (0-255) or float32 in [0, 1] (the ONNX graph takes
the one ``input_dtype`` names, TorchScript both; other dtypes are refused).
Outputs: ``dissimilarity`` f(x) (float32, higher = more anomalous) and
``decision`` (int64: +1 normal, -1 anomaly, f >= threshold compared in float64
as ``DLMSVDD.predict``) and ``p_value`` (float64: the conformal p-value
``(1 + #{calibration f >= f}) / (n_cal + 1)`` from the model's calibration
normals, which the scorer holds; NaN where f is not finite, and everywhere for
a model without calibration normals). An image it cannot read is never called
normal: a float image with a value outside the record's ``float_range``
([0, 1]) or not finite gets f = NaN, and any image whose f is not finite
decision -1. A table model's input is its encoding's codes
(``dlmsvdd_ext.tabular``): numbers, category codes, and NaN for a missing cell,
which a record that imputes takes (``missing_taken``) and any other refuses.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import torch
import torch.nn as nn

import dlmsvdd_ext
from dlmsvdd_ext.portable import PortableBoundary

from . import guard, input_consensus

FORMATS = ("onnx", "torchscript")
INPUT_DTYPES = {"float32": torch.float32, "uint8": torch.uint8}
SUFFIXES = {"onnx": ".onnx", "torchscript": ".torchscript.pt"}


def _dtype_name(dtype: torch.dtype) -> str:
    """A dtype's name, also in TorchScript (whose str(dtype) is a number)."""
    for known, name in ((torch.float64, "float64"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16"),
                        (torch.int64, "int64"), (torch.int32, "int32"), (torch.int16, "int16"), (torch.int8, "int8"),
                        (torch.bool, "bool")):
        if dtype == known:
            return name
    return "other than uint8 and float32"


class Scorer(nn.Module):
    """Raw images -> (f, decision, p_value). What it takes is checked: a dtype other than
    uint8 or float32 raises (the ONNX graph's input type refuses it); a float
    image with a value outside ``float_range`` or not finite gets f = NaN, and
    an image whose f is not finite (that, or an overflow) the decision -1:
    an unreadable image is never called normal."""

    def __init__(self, preprocess: nn.Module, network: nn.Module, boundary: nn.Module, threshold: float,
                 expects: str, float_range: tuple[float, float], calibration: torch.Tensor | None = None,
                 missing_taken: bool = False, combination: nn.Module | None = None):
        super().__init__()
        # the model's score of its input and f (input_consensus: f as it is, or with the input consensus)
        self.combination = input_consensus.DeepScore() if combination is None else combination
        self.missing_taken = missing_taken  # NaN is a missing cell the preprocessing imputes
        self.preprocess, self.network, self.boundary = preprocess, network, boundary
        self.threshold = float(threshold)
        self.expects = expects
        self.low, self.high = (float(v) for v in float_range)
        self.calibrated = calibration is not None
        self.register_buffer("calibration", torch.zeros(0, dtype=torch.float64) if calibration is None
                             else calibration.to(torch.float64).reshape(-1))

    def p_values(self, f: torch.Tensor) -> torch.Tensor:
        """Conformal p-values of f (a count against every calibration score: n_cal is small)."""
        at_least = (self.calibration[None, :] >= f.double()[:, None]).sum(1).double()
        p = (1.0 + at_least) / (self.calibration.shape[0] + 1.0)
        usable = torch.isfinite(f)
        if not self.calibrated:  # no calibration normals: no p-value
            usable = torch.zeros_like(usable)
        return torch.where(usable, p, torch.full_like(p, float("nan")))

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if images.dtype != torch.uint8 and images.dtype != torch.float32:  # static in an ONNX graph
            raise ValueError("got images of dtype " + _dtype_name(images.dtype) + "; the model expects "
                             + self.expects + " (dtype uint8 or float32)")
        inputs = self.preprocess(images)
        f = self.combination(inputs, self.boundary(self.network(inputs)))
        if images.dtype == torch.float32:  # NaN fails both comparisons
            inside = (images >= self.low) & (images <= self.high)
            if self.missing_taken:
                inside = inside | torch.isnan(images)
            taken = inside.flatten(1).all(1)
            f = torch.where(taken, f, torch.full_like(f, float("nan")))
        normal = torch.isfinite(f) & (f.double() < self.threshold)
        return f, 2 * normal.long() - 1, self.p_values(f)


def build_scorer(model) -> Scorer:
    """The scorer of a fitted DLMSVDD, in eval mode on the CPU."""
    spec = model.stored_preprocessing()
    network = copy.deepcopy(model.network_).cpu()
    calibration = None if model.calibration_ is None else torch.from_numpy(model.calibration_.scores)
    boundary = PortableBoundary(model.svdd_)
    if network.guard is not None:  # rows beyond the data score above it, as DLMSVDD scores them
        boundary = guard.GuardedScore(boundary, float(network.guard.floor), network.guard.floor_start())
    consensus = getattr(model, "input_consensus_", None)
    scorer = Scorer(spec.module(), network, boundary, model.threshold_, spec.expects(),
                    spec.float_range, calibration, getattr(spec, "missing_taken", False),
                    None if consensus is None else input_consensus.PortableCombination(consensus))
    return scorer.cpu().eval().requires_grad_(False)  # an export runs anywhere: built from CPU tensors


def metadata(model, input_dtype: str) -> dict:
    """What the exported file says about itself."""
    spec = model.stored_preprocessing()
    return {"producer": f"dlmsvdd {dlmsvdd_ext.__version__}", "input": spec.expects(), "input_dtype": input_dtype,
            "outputs": "dissimilarity (float32, higher = more anomalous; NaN: an image it cannot read), "
                       "decision (int64: +1 normal, -1 anomaly or unreadable), "
                       "p_value (float64, conformal; NaN: unreadable, or a model without calibration normals)",
            "n_calibration": str(0 if model.calibration_ is None else model.calibration_.n),
            "threshold": repr(float(model.threshold_)), "preprocessing": json.dumps(spec.to_dict()),
            "kernel": model.kernel_}


def export(model, path, format: str = "onnx", input_dtype: str = "float32") -> Path:
    """Writes the scorer of a fitted DLMSVDD to path; see the module docstring."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if input_dtype not in INPUT_DTYPES:
        raise ValueError(f"input_dtype must be one of {tuple(INPUT_DTYPES)}, got {input_dtype!r}")
    path, spec = Path(path), model.stored_preprocessing()
    if input_dtype not in spec.input_dtypes:
        raise ValueError(f"input_dtype {input_dtype!r}: this model takes {spec.expects()}")
    scorer = build_scorer(model)
    example = spec.example(2, INPUT_DTYPES[input_dtype])  # two: torch.export specialises a batch of 1
    if format == "onnx":
        _onnx(scorer, example, path, metadata(model, input_dtype), any_size=spec.any_size)
    else:
        _torchscript(scorer, example, path, metadata(model, "uint8 or float32"))
    return path


def _onnx(scorer: Scorer, example: torch.Tensor, path: Path, meta: dict, any_size: bool) -> None:
    try:
        import onnx
        import onnxscript  # noqa: F401 - torch's ONNX exporter needs it
    except ImportError as err:
        raise ValueError(f"ONNX export needs the export extra: pip install 'dlmsvdd[export]' ({err})") from None
    dims = {0: torch.export.Dim("batch")}
    if any_size:
        dims.update({2: torch.export.Dim("height"), 3: torch.export.Dim("width")})
    with torch.no_grad():
        program = torch.onnx.export(scorer, (example,), input_names=["images"],
                                    output_names=["dissimilarity", "decision", "p_value"], dynamic_shapes=({**dims},),
                                    dynamo=True, external_data=False, verbose=False)
    proto = program.model_proto
    proto.doc_string = "DLM-SVDD anomaly scorer: " + meta["input"]
    for key, value in meta.items():
        proto.metadata_props.add(key=key, value=value)
    onnx.save(proto, str(path))


def _torchscript(scorer: Scorer, example: torch.Tensor, path: Path, meta: dict) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        # torch marks TorchScript deprecated (ONNX is the format to prefer); the user asked for it
        warnings.filterwarnings("ignore", message=r".*torch\.jit.*deprecated", category=FutureWarning)
        scorer.network = torch.jit.trace(scorer.network, scorer.preprocess(example))  # any traceable backbone
        scripted = torch.jit.script(scorer)  # keeps the shape checks and the uint8 / float branch
    scripted.save(str(path), _extra_files={"dlmsvdd.json": json.dumps(meta)})
