"""The README's Python examples run as written."""

import re
from pathlib import Path

import numpy as np

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _python_block(after_heading: str) -> str:
    section = README[README.index(after_heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_dlmsvdd_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(_python_block("## DLM-SVDD in Python"), scope)
    assert scope["model"].evaluate(scope["task"].test)["auroc"] > 0.9
    assert (tmp_path / "model.pt").is_file()


def test_array_api_example():
    scope = {}
    exec(_python_block("## Arrays of images: the scikit-learn and PyOD API"), scope)
    model, X, y, held_out = scope["model"], scope["X"], scope["y"], ~scope["first"]
    from dlmsvdd import metrics

    assert metrics.auroc(y[held_out], model.dissimilarity(X[held_out])) > 0.9
    assert model.decision_scores_.shape == (scope["train"].sum(),)


def test_feature_vectors_example():
    scope = {}
    exec(_python_block("## Feature vectors: tables and embeddings"), scope)
    from dlmsvdd import metrics

    held_out = ~scope["train"]
    targets = np.where(scope["benign"][held_out] == 1, 1, -1)
    assert metrics.auroc(targets, scope["f"]) > 0.9
    assert scope["model"].training_params_["backbone"] == "mlp"


def test_lpsvdd_example():
    scope = {}
    exec(_python_block("## LpSVDD in five lines"), scope)
    assert scope["model"].gap_ <= 1e-6 * scope["model"].objective_
