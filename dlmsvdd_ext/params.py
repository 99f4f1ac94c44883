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

# The solvers of the alpha-step (``solver.solve``'s methods); named here, in the parameter table
# that the dual problem and the solver both import, so that the solver's modules stand in layers.
METHODS = ("apg", "pairwise", "paper")
GAMMA_STRATEGIES = ("local", "median", "per-epoch")

# The smallest slack exponent p supported. The dual's penalty is pen alpha^q
# with q = p / (p - 1); at the paper's c = 1/n it is about
# 0.5 (1 - 1/p) (2 mu)^q at the start, (2 mu)^11 for p = 1.1: up to 1e7
# times the kernel term a^T K a (<= nu^2) for the paper's largest nu = 5,
# which float64 still resolves to 1e-9. At p = 1.02 (q = 51) it is 1e15 times
# the kernel term, which then drowns in the rounding of the objective (the
# certificate read -40 and r^2 -2.5e16); at p = 1.001 pen overflows float64.
P_MIN = 1.1

CONSTRAINTS: dict[str, list] = {
    "p": [Interval(Real, P_MIN, math.inf, closed="left")],
    "nu": [Interval(Real, 1, math.inf, closed="left"), StrOptions({"auto"})],
    "c1": [Interval(Real, 0, math.inf, closed="neither"), None],
    "c2": [Interval(Real, 0, math.inf, closed="neither"), None],
    "slack_scale": [Interval(Real, 0, math.inf, closed="neither")],
    "gamma": [StrOptions({"local", "median"}), Interval(Real, 0, math.inf, closed="neither"), StrOptions({"per-epoch"})],
    "kernel": [StrOptions(set(BACKENDS) | {"auto"})],
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "solver": [StrOptions(set(METHODS))],
    "max_iter": [Interval(Integral, 0, None, closed="left")],
    "tol": [Interval(Real, 0, math.inf, closed="left")],
    "cache_size": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    # the fraction of training normals above the threshold, or the sphere's radius
    "contamination": [Interval(Real, 0, 0.5, closed="right"), StrOptions({"radius"})],
    "recovery": [StrOptions({"kkt", "paper"})],
    "random_state": [Interval(Integral, 0, None, closed="left"), None],
    "device": [str, torch.device, None],
    "warm_start": ["boolean"],
    "categorical": [list, None],  # table columns one-hot encoded although numeric (dlmsvdd_ext.tabular)
    "missing": [StrOptions({"impute"}), None],  # missing table cells: refused (None) or imputed
    # the threshold's and the p-values' scores: cross-fitted training normals ("auto"), or none until calibrate
    "calibration": [StrOptions({"auto"}), None],
}


# Why a bound is where it is, appended to the message of a value outside it.
WHY = {"p": f"p = {P_MIN} is the smallest supported: below it the penalty alpha^q, q = p/(p-1), "
            "swamps the kernel term (or overflows) in float64 at the default c = 1/n"}


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
        if right not in (None, math.inf):  # bounded: the interval itself, "in (0, 0.5]"
            brackets = {"neither": "()", "left": "[)", "right": "(]", "both": "[]"}[constraint.closed]
            return f"{kind} in {brackets[0]}{left:g}, {right:g}{brackets[1]}"
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
            why = f" ({WHY[key]})" if key in WHY else ""
            infinite = isinstance(value, Real) and not math.isfinite(value)
            raise InvalidParameterError(f"{name} must be {allowed}, got {value!r}" + " (not finite)" * infinite + why)

