"""The boundary's hyper-parameters: one table of constraints, checked in one place.

``CONSTRAINTS`` is ``LpSVDD._parameter_constraints`` (scikit-learn's style and
constraint objects); ``check`` validates a mapping of values against it (or
against another table in the same style: the training driver's own fields)
with a message that says what is wrong and what is allowed. ``LpSVDD.fit``, the
dual problem and the training driver's configuration all check through here;
the compiled binding's own checks stay as the last line of defence.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions

from .kernels import BACKENDS
from .solver import METHODS

GAMMA_STRATEGIES = ("median", "per-epoch")

CONSTRAINTS: dict[str, list] = {
    "p": [Interval(Real, 1, math.inf, closed="neither")],
    "nu": [Interval(Real, 1, math.inf, closed="left")],
    "c1": [Interval(Real, 0, math.inf, closed="neither"), None],
    "c2": [Interval(Real, 0, math.inf, closed="neither"), None],
    "gamma": [StrOptions({"median"}), Interval(Real, 0, math.inf, closed="neither"), StrOptions({"per-epoch"})],
    "kernel": [StrOptions(set(BACKENDS))],
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "solver": [StrOptions(set(METHODS))],
    "max_iter": [Interval(Integral, 0, None, closed="left")],
    "tol": [Interval(Real, 0, math.inf, closed="left")],
    "cache_size": [Interval(Real, 0, None, closed="neither")],
    "recovery": [StrOptions({"kkt", "paper"})],
    "random_state": [Interval(Integral, 0, None, closed="left"), None],
    "device": [str, torch.device, None],
    "warm_start": ["boolean"],
}


def _describe(constraint) -> str:
    """A constraint in a user's words ("a positive number", "> 1", "one of (...)")."""
    if constraint is None:
        return "None"
    if isinstance(constraint, StrOptions):
        options = sorted(constraint.options)
        return repr(options[0]) if len(options) == 1 else f"one of {tuple(options)}"
    if isinstance(constraint, Interval):
        kind = "an integer" if constraint.type is Integral else "a number"
        left, right = constraint.left, constraint.right
        if left is not None and right not in (None, math.inf):
            opening = "[" if constraint.closed in ("left", "both") else "("
            closing = "]" if constraint.closed in ("right", "both") else ")"
            return f"{kind} in {opening}{left:g}, {right:g}{closing}"
        if left == 0 and constraint.closed in ("neither", "right"):
            return "a positive integer" if constraint.type is Integral else "a positive number"
        if right in (None, math.inf) and constraint.closed in ("left", "both"):
            return f">= {left:g}" if constraint.type is Real else f"{kind} >= {left:g}"
        if right == math.inf and constraint.closed == "neither":
            return f"a finite number > {left:g}"
        return str(constraint)
    if constraint == "boolean":
        return "True or False"
    if isinstance(constraint, type):
        return f"a {constraint.__module__}.{constraint.__name__}" if constraint.__module__ != "builtins" \
            else f"a {constraint.__name__}"
    return str(constraint)


def _satisfied(constraint, value) -> bool:
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, (bool, np.bool_))
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    if isinstance(constraint, Interval) and isinstance(value, (bool, np.bool_)):
        return False  # True is not a number of iterations
    return constraint.is_satisfied_by(value)


def check(values: dict, names: dict | None = None, table: dict | None = None) -> None:
    """Raises ``InvalidParameterError`` (a ValueError) for the first value that
    breaks its constraint in ``table`` (default: ``CONSTRAINTS``). ``names``
    renames parameters in the message (the training configuration calls
    ``kernel`` "backend", ``tol`` "fw_tol")."""
    for key, value in values.items():
        constraints = (CONSTRAINTS if table is None else table)[key]
        if not any(_satisfied(c, value) for c in constraints):
            name = (names or {}).get(key, key)
            allowed = " or ".join(_describe(c) for c in constraints)
            infinite = isinstance(value, Real) and not math.isfinite(value)
            raise InvalidParameterError(f"{name} must be {allowed}, got {value!r}" + (" (not finite)" * infinite))

