"""The methods the ADBench benchmark compares, as name -> method(X_train, s, seed) -> scorer.

``s`` is 1 on the labelled training anomalies and 0 on the unlabelled rows (normals and the
unlabelled anomalies); the scorer maps test rows to scores, higher = more anomalous. Adding a
method is one line in METHODS. Every method is at its defaults (``seed`` only seeds it).
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
from sklearn.ensemble import IsolationForest
from sklearn.svm import SVC, OneClassSVM

from dlmsvdd_ext import LpSVDD

from benchmarks.adbench_protocol import MethodSkipped

DEEPOD_EPOCHS = 50  # issue 28's table trained deepod's models for 50 epochs; all else at deepod's defaults


def _targets(s: np.ndarray) -> np.ndarray:
    """The package's labels: -1 labelled anomaly, +1 unlabelled."""
    return np.where(s == 1, -1, 1)


def lpsvdd_labels(X, s, seed):
    model = LpSVDD(random_state=seed).fit(X, _targets(s))
    return model.dissimilarity


def lpsvdd_paper(X, s, seed):
    """The defaults before issue 28: the paper's nu = 1.2 and the median bandwidth."""
    model = LpSVDD(nu=1.2, gamma="median", random_state=seed).fit(X, _targets(s))
    return model.dissimilarity


def lpsvdd_one_class(X, s, seed):
    model = LpSVDD(nu=1.0, random_state=seed).fit(X[s == 0])
    return model.dissimilarity


def isolation_forest(X, s, seed):
    model = IsolationForest(random_state=seed).fit(X)
    return lambda Z: -model.score_samples(Z)


def one_class_svm(X, s, seed):
    model = OneClassSVM().fit(X)
    return lambda Z: -model.score_samples(Z)


def rbf_svc(X, s, seed):
    model = SVC(kernel="rbf").fit(X, s)
    return model.decision_function


def xgboost(X, s, seed):
    try:
        from xgboost import XGBClassifier
    except ImportError as e:
        raise MethodSkipped("xgboost is not installed (pip install 'dlmsvdd[adbench]')") from e
    model = XGBClassifier(random_state=seed, n_jobs=1).fit(X, s)
    return lambda Z: model.predict_proba(Z)[:, 1]


def _deepod(class_name: str):
    def method(X, s, seed):
        try:
            from deepod.models import tabular
        except ImportError as e:
            raise MethodSkipped("deepod is not installed (pip install 'dlmsvdd[adbench]')") from e
        model = getattr(tabular, class_name)(epochs=DEEPOD_EPOCHS, device="cpu", verbose=0, random_state=seed)
        try:
            model.fit(X.astype(np.float32), s)
        except ValueError as e:  # PReNet draws pairs of labelled anomalies without replacement
            if "larger sample than population" not in str(e):
                raise
            raise MethodSkipped(f"deepod's {class_name} cannot fit {int(s.sum())} labelled anomalies ({e})") from e
        return lambda Z: model.decision_function(Z.astype(np.float32))
    return method


def dlmsvdd_vectors(X, s, seed):
    from dlmsvdd import DLMSVDD

    try:
        model = DLMSVDD(seed=seed, verbose=0).fit(X.astype(np.float32), _targets(s))
    except ValueError as e:
        if "images" in str(e):  # the API before DLMSVDD took (N, D) feature vectors (issue 28, part 1)
            raise MethodSkipped("DLMSVDD.fit takes images only in this version; it refuses (N, D) feature "
                                "vectors (issue 28, part 1)") from e
        raise
    return lambda Z: model.dissimilarity(Z.astype(np.float32))


def dlmsvdd_scorer(X, y, seed, **overrides):
    """DLMSVDD at its defaults (and ``overrides``) fitted on float32 rows; its scorer."""
    from dlmsvdd import DLMSVDD

    model = DLMSVDD(seed=seed, verbose=0, **overrides).fit(X.astype(np.float32), y)
    return lambda Z: model.dissimilarity(Z.astype(np.float32))


def dlmsvdd_without_labels(X, s, seed):
    """The same rows without their labels: ``fit(X)`` (issue 38: labels must never hurt)."""
    return dlmsvdd_scorer(X, None, seed)


def lpsvdd_without_labels(X, s, seed):
    return LpSVDD(random_state=seed).fit(X).dissimilarity


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


METHODS = {
    "DLM-SVDD (default, vectors)": dlmsvdd_vectors,
    "LpSVDD with labels (defaults)": lpsvdd_labels,
    "LpSVDD with labels (paper: nu=1.2, gamma=median)": lpsvdd_paper,
    "LpSVDD one-class (unlabelled rows, nu=1)": lpsvdd_one_class,
    "DLM-SVDD without labels (fit(X), the same rows)": dlmsvdd_without_labels,
    "LpSVDD without labels (fit(X), the same rows)": lpsvdd_without_labels,
    "IsolationForest": isolation_forest,
    "OneClassSVM": one_class_svm,
    "RBF SVC (labelled vs unlabelled)": rbf_svc,
    "XGBoost (defaults, labelled vs unlabelled)": xgboost,
    f"Deep SAD (deepod {_version('deepod')}, {DEEPOD_EPOCHS} epochs)": _deepod("DeepSAD"),
    f"DevNet (deepod {_version('deepod')}, {DEEPOD_EPOCHS} epochs)": _deepod("DevNet"),
    f"PReNet (deepod {_version('deepod')}, {DEEPOD_EPOCHS} epochs)": _deepod("PReNet"),
}


def versions() -> dict:
    return {p: _version(p) for p in ("dlmsvdd", "scikit-learn", "xgboost", "deepod", "torch", "numpy")}
