"""Where a model lives: the one owner of device placement.

A ``DLMSVDD`` model is a network (with its distance guard), a boundary (``LpSVDD``:
support features or a kernel map, the calibration scores), and for feature vectors an
input consensus. ``place`` moves all of them, and the model's ``device``, together;
``DLMSVDD.to``, ``DLMSVDD.load(..., device=...)`` and the command line's ``--device``
go through it. Files hold CPU tensors only (``dlmsvdd_ext.placement.cpu_copy``, which
``checkpoints.write`` and the exports apply), so a model trained on a GPU loads on any
machine. ``devices_of`` lists the devices of every tensor a model holds: one device,
always (the tests check it on the CPU with torch's "meta" device and on a GPU).
"""

from __future__ import annotations

import torch
import torch.nn as nn


def _has_backend(kind: str) -> bool:
    module = getattr(torch, kind, None)
    return bool(getattr(module, "is_available", lambda: False)())


def resolve(name: str) -> torch.device:
    """"auto": a CUDA GPU when torch sees one, else the CPU; any other name must be on this machine.

    Parameters
    ----------
    name : str
        "auto", or a device torch parses ("cpu", "cuda", "cuda:1", ...).

    Returns
    -------
    torch.device
        The device.

    Raises
    ------
    ValueError
        A device this machine does not have, with what to use instead.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            why = "torch sees no CUDA GPU" if torch.backends.cuda.is_built() else "this torch was built without CUDA"
            raise ValueError(f"device {name!r} asked for, but {why}; use --device cpu (device='cpu')")
        if device.index is not None and device.index >= count:
            raise ValueError(f"device {name!r} asked for, but torch sees {count} CUDA GPU(s); "
                             f"use cuda:0 to cuda:{count - 1} or --device cpu")
    elif device.type not in ("cpu", "meta") and not _has_backend(device.type):
        raise ValueError(f"device {name!r} is not available on this machine; use --device cpu")
    return device


# A GPU alpha-step of few rows waits on launches and synchronisations, not arithmetic: on an H100 the
# digits demo's solves (about 150 rows) took 7.7 ms each against 2.7 ms on the same machine's 16 CPU
# cores, whose exact products grow as n^2 (issue 47). Up to this many rows the dual is solved on the
# CPU and the boundary then moved to the model's GPU.
CPU_SOLVE_ROWS = 256


def solve_device(device: torch.device, rows: int) -> torch.device:
    """Where an alpha-step of ``rows`` rows is solved for a model on ``device``."""
    return torch.device("cpu") if device.type == "cuda" and rows <= CPU_SOLVE_ROWS else device


def indexed(device: torch.device) -> torch.device:
    """A CUDA device with its index (the current one for "cuda"), as its tensors report it."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def place(model, device: torch.device) -> None:
    """Move a fitted (or loaded) ``DLMSVDD`` whole: network and guard, boundary (with its
    kernel map and calibration), input consensus, and the device it computes on."""
    model.device = torch.device(device)
    if getattr(model, "network_", None) is not None:
        model.network_.to(device)
    if getattr(model, "svdd_", None) is not None:
        model.svdd_.to(device)
    if getattr(model, "input_consensus_", None) is not None:
        model.input_consensus_.to(device)
    if isinstance(getattr(model, "reference_", None), torch.Tensor):  # explain's baselines
        model.reference_ = model.reference_.to(device)


def devices_of(obj, _seen=None) -> set[torch.device]:
    """The devices of every tensor ``obj`` holds: its attributes, through modules, dicts, lists
    and the package's own objects (not numpy arrays, which are host memory by nature).

    Parameters
    ----------
    obj : object
        A model, or any part of one.

    Returns
    -------
    set of torch.device
        One device for a model in one place.
    """
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return set()
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return {obj.device}
    if isinstance(obj, nn.Module):
        found = {t.device for t in obj.state_dict().values() if isinstance(t, torch.Tensor)}
        return found.union(*(devices_of(v, seen) for v in vars(obj).values() if not isinstance(v, (dict, nn.Module))))
    if isinstance(obj, dict):
        return set().union(*(devices_of(v, seen) for v in obj.values()))
    if isinstance(obj, (list, tuple)):
        return set().union(*(devices_of(v, seen) for v in obj))
    module = type(obj).__module__ or ""
    if module.split(".")[0] in ("dlmsvdd", "dlmsvdd_ext") and hasattr(obj, "__dict__"):
        return set().union(*(devices_of(v, seen) for v in vars(obj).values()))
    return set()
