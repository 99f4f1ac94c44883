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
    """A sweep of one of the paper's experiments: a base, a grid, and parts united.

    Parameters
    ----------
    name : str
        The preset's name.
    description : str
        What it reproduces.
    base : dict
        ``TrainConfig`` fields every task shares.
    grid : dict
        Field -> list of values, for every part.
    parts : list of dict
        Grids whose tasks are united (``approx``: the exact kernel once, the
        approximations at every budget).
    """

    name: str
    description: str = ""
    base: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    parts: list = field(default_factory=lambda: [{}])

    def __post_init__(self):
        self.sweeps()  # checks every configuration now, before anything runs
        check_unique(self.tasks(), f"preset {self.name!r}")

    def sweeps(self) -> list[Sweep]:
        """One sweep per part.

        Returns
        -------
        list of dlmsvdd.experiments.sweep.Sweep
            The parts' sweeps.
        """
        return [Sweep(self.base, {**self.grid, **part}) for part in self.parts]

    def tasks(self) -> list[tuple[str, dict]]:
        """Every part's tasks.

        Returns
        -------
        list of tuple
            (task folder name, configuration values) pairs.
        """
        return [task for sweep in self.sweeps() for task in sweep.tasks()]

    def override(self, values: dict) -> "Preset":
        """A copy with values applied, as ``--set`` applies them.

        Parameters
        ----------
        values : dict
            Field -> value: a list replaces that grid axis (or adds one), a
            single value goes to the base and removes the axis.

        Returns
        -------
        Preset
            The new preset, checked.
        """
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
        """The preset as ``preset.yaml`` holds it.

        Returns
        -------
        dict
            ``description``, ``base``, ``grid`` and ``parts``.
        """
        return {"description": self.description, "base": self.base, "grid": self.grid, "parts": self.parts}

    def run(self, folder, **options) -> list[dict]:
        """Run every part's unfinished tasks into a folder.

        Writes the resolved preset to ``folder/preset.yaml`` once the folder's
        records were checked.

        Parameters
        ----------
        folder : str or pathlib.Path
            The sweep folder.
        **options
            ``dlmsvdd.experiments.sweep.run_sweep``'s options.

        Returns
        -------
        list of dict
            Every task's record.
        """
        def write_preset(folder: Path) -> None:
            run_outputs.write_yaml(folder / "preset.yaml", {"name": self.name, **self.to_dict()})

        return run_tasks(self.tasks(), folder, prepare=write_preset, **options)

    def collect(self, folder) -> list[dict]:
        """The records of the preset's tasks in a folder.

        Parameters
        ----------
        folder : str or pathlib.Path
            The sweep folder.

        Returns
        -------
        list of dict
            The finished tasks' records.
        """
        return collect_tasks(self.tasks(), folder)

    @classmethod
    def from_sweep(cls, sweep: Sweep, name: str = "sweep") -> "Preset":
        """A preset of one part from a sweep.

        Parameters
        ----------
        sweep : dlmsvdd.experiments.sweep.Sweep
            The sweep.
        name : str
            The preset's name.

        Returns
        -------
        Preset
            The preset.
        """
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
    """A preset by name, or from a preset YAML file.

    Parameters
    ----------
    name : str
        A shipped preset ("ratio", "long-tailed", "approx", ...) or a YAML file.
    digits : bool
        Its small version on the embedded digits.
    overrides : dict or None
        As ``--set``, applied last (see ``Preset.override``).

    Returns
    -------
    Preset
        The preset, checked.
    """
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
