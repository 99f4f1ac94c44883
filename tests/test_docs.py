"""Every Python block of README.md and of the documentation's pages (docs/**/*.md) runs as written.

The blocks of one page share one scope and run in order, in a fresh working folder, as a
reader who pastes them one after the other would run them. Some blocks are followed by
checks of what they claim (an AUROC, a file written, a certificate): the checks of the
README's former tests, now on the pages that hold those examples.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILT = {"_build", "_generated", "auto_examples", "api"}  # written by the docs build, not sources
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def pages() -> list[Path]:
    found = [ROOT / "README.md"]
    found += sorted(p for p in DOCS.rglob("*.md") if not BUILT & set(p.relative_to(DOCS).parts))
    return found


def python_blocks(page: Path) -> list[str]:
    """The page's ```python blocks, in order."""
    return FENCE.findall(page.read_text())


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


WITH_CODE = [p for p in pages() if python_blocks(p)]


# ---- what some blocks claim, checked after they ran: (page, block index) -> check(scope, folder)

def _trained_digits_model(scope, folder):
    assert scope["model"].evaluate(scope["task"].test)["auroc"] > 0.9
    assert (folder / "model.pt").is_file()


def _array_api(scope, folder):
    from dlmsvdd import metrics

    model, X, y, held_out = scope["model"], scope["X"], scope["y"], ~scope["first"]
    assert metrics.auroc(y[held_out], model.dissimilarity(X[held_out])) > 0.9
    assert model.decision_scores_.shape == (scope["train"].sum(),)


def _feature_vectors(scope, folder):
    from dlmsvdd import metrics

    held_out = ~scope["train"]
    targets = np.where(scope["benign"][held_out] == 1, 1, -1)
    assert metrics.auroc(targets, scope["f"]) > 0.9
    assert scope["model"].training_params_["backbone"] == "mlp"


def _table_codes(scope, folder):
    assert scope["encoding"].feature_names() == ["amount", "channel=phone", "channel=shop", "channel=web", "age",
                                                 "missing(age)"]
    np.testing.assert_array_equal(scope["codes"], [[20, 2, 50], [160, -1, np.nan]])


def _lpsvdd_certificate(scope, folder):
    assert scope["model"].gap_ <= 1e-6 * scope["model"].objective_


def _first_model(scope, folder):
    assert scope["model"].evaluate(scope["task"].test)["auroc"] > 0.9


def _run_folder(scope, folder):
    files = {p.name for p in scope["folder"].iterdir()}
    assert {"config.yaml", "metrics.json", "history.csv", "convergence.png", "roc.png", "model.pt"} <= files
    assert "checkpoint.pt" not in files  # removed once model.pt is written


def _sweep(scope, folder):
    assert len(scope["records"]) == 4 and all(r["status"] == "done" for r in scope["records"])
    assert (folder / "sweeps" / "frozen" / "report.md").is_file()


def _image_arrays(scope, folder):
    source, inputs = scope["source"], scope["inputs"]
    assert (source.channels, source.image_size, len(source.train)) == (3, 16, 60) and inputs.shape == (8, 3, 16, 16)
    np.testing.assert_array_equal(scope["targets"].numpy(), scope["task"].train.targets[:8])


def _consensus(scope, folder):
    scores = scope["scores"]
    assert scores[-2:].min() > scores[:-2].max()  # the rows far out score highest
    assert (folder / "consensus.pt").is_file()


def _calibrated(scope, folder):
    assert scope["model"].calibration_source_ == "calibrate(X_cal)"


CHECKS = {
    ("README.md", 0): _trained_digits_model,
    ("docs/user-guide/detector.md", 0): _trained_digits_model,
    ("docs/user-guide/detector.md", 1): _array_api,
    ("docs/user-guide/detector.md", 2): _image_arrays,
    ("docs/user-guide/detector.md", 3): _consensus,
    ("docs/user-guide/feature-vectors.md", 0): _feature_vectors,
    ("docs/user-guide/feature-vectors.md", 2): _table_codes,
    ("docs/user-guide/solver.md", 0): _lpsvdd_certificate,
    ("docs/getting-started.md", 1): _first_model,
    ("docs/user-guide/run-folders.md", 0): _run_folder,
    ("docs/user-guide/sweeps.md", 0): _sweep,
    ("docs/user-guide/thresholds.md", 1): _calibrated,
}


@pytest.mark.parametrize("page", WITH_CODE, ids=name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files the blocks write (model.pt, runs/, sweeps/) land here
    scope = {"__name__": "__docs__"}
    for index, block in enumerate(python_blocks(page)):
        try:
            exec(compile(block, f"{name(page)}, python block {index}", "exec"), scope)
        except Exception as err:
            raise AssertionError(f"{name(page)}: python block {index} failed: {err!r}\n{block}") from err
        check = CHECKS.get((name(page), index))
        if check is not None:
            check(scope, tmp_path)


def test_checks_name_blocks_that_exist():
    """A check whose block moved or vanished would otherwise never run."""
    counts = {name(p): len(python_blocks(p)) for p in pages()}
    assert [key for key in CHECKS if counts.get(key[0], 0) <= key[1]] == []


def test_the_pages_that_hold_examples_are_found():
    found = {name(p) for p in WITH_CODE}
    assert {"README.md", "docs/getting-started.md", "docs/user-guide/detector.md",
            "docs/user-guide/thresholds.md", "docs/user-guide/export.md"} <= found
    # a ```python fence the pattern misses (another spelling, indented) would escape the test
    for page in pages():
        opened = len(re.findall(r"^```\s*python", page.read_text(), re.M | re.I))
        assert opened == len(python_blocks(page)), name(page)
