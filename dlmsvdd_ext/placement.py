"""Where a fitted estimator's tensors live, and the CPU copies written to files.

Each fitted object of the package (``LpSVDD``, its kernel backend, ``Consensus``) moves
itself with ``to(device)``, which moves every tensor attribute it holds with
``move_tensors`` and then its parts; ``cpu_copy`` is what every file writer stores,
so that a file written on a GPU loads on a machine without one.
"""

from __future__ import annotations

import torch


def move_tensors(obj, device) -> None:
    """Every tensor attribute of ``obj`` (its ``__dict__``) moved to ``device`` in place, dtype kept.

    Parameters
    ----------
    obj : object
        An estimator or backend whose fitted state is held in tensor attributes.
    device : str or torch.device
        Where the tensors go.
    """
    for name, value in list(vars(obj).items()):
        if isinstance(value, torch.Tensor):
            setattr(obj, name, value.to(device))


def cpu_copy(value):
    """``value`` with every tensor in it (through dicts, lists and tuples) on the CPU.

    Parameters
    ----------
    value : object
        A state dict, or anything nested in one.

    Returns
    -------
    object
        The same structure; tensors already on the CPU are the same objects.
    """
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: cpu_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(cpu_copy(v) for v in value)
    return value
