"""The paper's experiments and ablations as named sweeps (``presets/<name>.yaml``).

A preset is a sweep whose grid may be a union of parts: ``base`` (config
values), ``grid`` (axes shared by every part) and ``parts`` (each adds its own
axes; e.g. the exact kernel once, the approximations at every budget m). Its
``digits`` section, on top of the shared ``DIGITS`` values, makes it run on the
embedded digits data at a small size.

Overrides (``--set key=value`` on the command line) are parsed as YAML: a list
replaces that axis wherever it is (the shared grid or a part), or adds it to
the shared grid; a single value goes to ``base`` and removes the axis. An axis
may be written ``{range: [start, stop]}``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from ..training.config import TrainConfig, typed
from . import run_outputs
from .sweep import Sweep, check_unique, collect_tasks, run_tasks

# What every preset changes to run on digits: the small CNN from scratch trained as the demo
# and the issue-16 benchmark train it, its recipe ("scratch") and epoch count at their
# defaults (a paper preset's 500 epochs included), so a --digits sweep runs the default
# that benchmark measured. A preset's own ``digits`` section may still shorten it (approx).
DIGITS = {"data": "digits", "root": None, "backbone": "small_cnn", "weights": None, "image_size": None,
          "epochs": TrainConfig.epochs}
SECTIONS = {"description", "base", "grid", "parts", "digits"}


@dataclass
class Preset:
    name: str
    description: str = ""
    base: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    parts: list = field(default_factory=lambda: [{}])

    def __post_init__(self):
        self.sweeps()  # checks every configuration now, before anything runs
        check_unique(self.tasks(), f"preset {self.name!r}")

    def sweeps(self) -> list[Sweep]:
        return [Sweep(self.base, {**self.grid, **part}) for part in self.parts]

    def tasks(self) -> list[tuple[str, dict]]:
        return [task for sweep in self.sweeps() for task in sweep.tasks()]

    def override(self, values: dict) -> "Preset":
        """A copy with ``values`` applied (lists: axes; single values: base)."""
        base, grid, parts = copy.deepcopy(self.base), copy.deepcopy(self.grid), copy.deepcopy(self.parts)
        for key, value in values.items():
            value = axis_values(value)
            if isinstance(value, (list, tuple)):
                holders = [axes for axes in [grid, *parts] if key in axes] or [grid]
                for axes in holders:
                    axes[key] = list(value)
                base.pop(key, None)
            else:
                base[key] = value
                for axes in [grid, *parts]:
                    axes.pop(key, None)
        return Preset(self.name, self.description, base, grid, parts)

    def to_dict(self) -> dict:
        return {"description": self.description, "base": self.base, "grid": self.grid, "parts": self.parts}

    def run(self, folder, **options) -> list[dict]:
        """Runs every part's unfinished tasks into ``folder`` (``run_tasks``'
        options); writes the resolved preset to ``folder/preset.yaml`` once the
        folder's records were checked; returns every task's record."""
        def write_preset(folder: Path) -> None:
            run_outputs.write_yaml(folder / "preset.yaml", {"name": self.name, **self.to_dict()})

        return run_tasks(self.tasks(), folder, prepare=write_preset, **options)

    def collect(self, folder) -> list[dict]:
        return collect_tasks(self.tasks(), folder)

    @classmethod
    def from_sweep(cls, sweep: Sweep, name: str = "sweep") -> "Preset":
        return cls(name, base=dict(sweep.base), grid=dict(sweep.grid))


def _folder():
    return resources.files("dlmsvdd.experiments") / "preset_files"


def names() -> list[str]:
    return sorted(p.name[:-5] for p in _folder().iterdir() if p.name.endswith(".yaml"))


def _spec(name: str) -> tuple[str, dict]:
    if name in names():
        return name, yaml.safe_load((_folder() / f"{name}.yaml").read_text())
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path.stem, yaml.safe_load(path.read_text())
    raise ValueError(f"unknown preset {name!r}; choose one of {names()} or give a preset YAML file")


def load(name: str, digits: bool = False, overrides: dict | None = None) -> Preset:
    """The preset called ``name`` (or a preset YAML file); ``digits``: its small
    digits version; ``overrides``: as ``--set``, applied last."""
    name, spec = _spec(name)
    if not isinstance(spec, dict) or set(spec) - SECTIONS:
        raise ValueError(f"preset {name!r}: expected a mapping with sections {sorted(SECTIONS)}")
    grid = {k: axis_values(v) for k, v in (spec.get("grid") or {}).items()}
    parts = [{k: axis_values(v) for k, v in part.items()} for part in spec.get("parts") or [{}]]
    preset = Preset(name, spec.get("description", ""), spec.get("base") or {}, grid, parts)
    if digits:
        preset = preset.override({**DIGITS, **(spec.get("digits") or {})})
    return preset.override(overrides or {})


def axis_values(value):
    """``{range: [start, stop]}`` (or ``[start, stop, step]``) as the list of those
    integers, for axes too long to write out (ImageNet-LT's 1000 classes); any
    other value as it is."""
    if isinstance(value, dict) and set(value) == {"range"}:
        bounds = value["range"]
        if not (isinstance(bounds, list) and 1 <= len(bounds) <= 3 and all(isinstance(b, int) for b in bounds)):
            raise ValueError(f"range takes a list of 1 to 3 integers, got {bounds!r}")
        return list(range(*bounds))
    return value


def parse_assignment(text: str) -> tuple[str, object]:
    """'key=value' with the value read as YAML: 'epochs=5', 'seed=[0,1,2]', 'weights=null';
    each value typed as the config field (``TrainConfig``'s ``typed``: 'lr=1e-3' is a float)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected key=value, got {text!r}")
    key = key.strip().replace("-", "_")
    try:
        value = axis_values(yaml.safe_load(value))
    except yaml.YAMLError as err:
        raise ValueError(f"cannot read the value of {text!r}: {err}") from None
    return key, [typed(key, v) for v in value] if isinstance(value, list) else typed(key, value)
