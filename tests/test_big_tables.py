"""Issue 35: big tables. ``kernel="auto"`` at its boundary, the choice recorded, the renamed option,
the up-front cost message and progress of a long exact fit, the epochs' draw of rows, and batches
sliced whole. Sizes are kept small by lowering the thresholds (monkeypatch): the rules, not the
machine's speed, are what is tested; the speed is the benchmark's (tests/benchmarks/test_bench_big_tables.py)."""

import json
import logging
import warnings

import numpy as np
import pytest
import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

from dlmsvdd import DLMSVDD, TrainConfig
from dlmsvdd.cli import main
from dlmsvdd.data import protocols
from dlmsvdd.training import batches, checkpoints, epoch_rows, self_labels
from dlmsvdd_ext import LpSVDD, kernel_choice, solver

FAST = dict(epochs=2, batch_size=64, verbose=0, seed=0)


def _rows(n, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


@pytest.fixture
def small_limit(monkeypatch):
    """"auto" switches to Nystrom above 200 rows, so that tests fit in milliseconds."""
    monkeypatch.setattr(kernel_choice, "EXACT_MAX_ROWS", 200)
    return 200


# ---- the rule

def test_auto_is_exact_up_to_the_limit_and_nystrom_above():
    limit = kernel_choice.EXACT_MAX_ROWS
    assert kernel_choice.choose("auto", 1024, limit) == ("exact", 1024)
    assert kernel_choice.choose("auto", 1024, limit + 1) == ("nystrom", kernel_choice.AUTO_COMPONENTS)
    assert kernel_choice.choose("auto", 64, 10 * limit) == ("nystrom", 64)  # a smaller budget is kept


@pytest.mark.parametrize("kernel", ["exact", "rff", "rpcholesky"])
def test_a_kernel_set_by_name_is_kept_at_every_size(kernel):
    for n in (10, kernel_choice.EXACT_MAX_ROWS + 1, 10**7):
        assert kernel_choice.choose(kernel, 512, n) == (kernel, 512)


def test_lpsvdd_auto_fits_as_the_kernel_it_chose(small_limit):
    """Below the limit "auto" is LpSVDD(kernel="exact"), above it LpSVDD(kernel="nystrom", m=256):
    the same scores, bit for bit."""
    X, Z = _rows(small_limit), _rows(50, seed=1)
    small = LpSVDD(random_state=0).fit(X)
    assert small.kernel_ == "exact"
    np.testing.assert_array_equal(small.dissimilarity(Z), LpSVDD(kernel="exact", random_state=0).fit(X).dissimilarity(Z))
    X = _rows(small_limit + 100)
    large = LpSVDD(random_state=0, n_components=512).fit(X)
    assert large.kernel_ == "nystrom" and large.n_components_ == kernel_choice.AUTO_COMPONENTS
    reference = LpSVDD(kernel="nystrom", n_components=kernel_choice.AUTO_COMPONENTS, random_state=0).fit(X)
    np.testing.assert_array_equal(large.dissimilarity(Z), reference.dissimilarity(Z))


def test_lpsvdd_says_the_choice_once_and_keeps_it_saved(small_limit, caplog):
    model = LpSVDD(random_state=0, warm_start=True)
    with caplog.at_level(logging.INFO, logger="dlmsvdd"):
        model.fit(_rows(300))
        model.fit(_rows(300, seed=1))  # the same choice: not said again
    said = [r.getMessage() for r in caplog.records if "kernel 'auto'" in r.getMessage()]
    assert said == ["kernel 'auto': nystrom with m = 256 for 300 training rows (the exact kernel's n^2 cost above "
                    "200; kernel='exact' forces it)"]
    restored = LpSVDD.from_state_dict(model.state_dict())
    assert restored.kernel_ == "nystrom" and restored.kernel == "auto"


# ---- DLMSVDD: the choice per epoch and for the final boundary, in the model and the run folder

def test_dlmsvdd_records_each_choice_and_saves_it(small_limit, tmp_path):
    X = _rows(400)  # 320 training rows: above the limit; each epoch draws 150 of them: below it
    model = DLMSVDD(**FAST, epoch_rows=150, input_consensus=False).fit(X)  # unlabelled: trained only without it
    assert [row["kernel"] for row in model.history_] == ["exact"] * 3
    assert [row["rows"] for row in model.history_] == [150] * 3
    assert model.kernel_ == "nystrom" and len(model.svdd_.alpha_) == model.n_train_ == 320  # all rows at the end
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    assert loaded.kernel_ == "nystrom"
    np.testing.assert_array_equal(loaded.dissimilarity(X[:20]), model.dissimilarity(X[:20]))


def _write_table(path, n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n, 3)), rng.normal(size=(20, 3)) + 4])
    y = np.r_[np.zeros(n, int), np.ones(20, int)]
    np.savez(path, X=X, y=y)


def test_the_run_folder_records_the_kernel(small_limit, tmp_path):
    _write_table(tmp_path / "t.npz")
    run = tmp_path / "run"
    assert main(["train", "--data", "table", "--path", str(tmp_path / "t.npz"), "--epochs", "1", "--verbose", "0",
                 "--output", str(run)]) == 0
    result = json.loads((run / "metrics.json").read_text())
    assert result["kernel"] == "nystrom" and result["n_components"] == kernel_choice.AUTO_COMPONENTS
    assert "kernel 'auto': nystrom with m = 256" in (run / "log.txt").read_text()
    assert yaml.safe_load((run / "config.yaml").read_text())["kernel"] == "auto"


# ---- the renamed option

def test_the_old_name_backend_is_refused_with_the_new_one(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"'backend' is now called 'kernel'.*write kernel='nystrom'"):
        DLMSVDD(backend="nystrom")
    with pytest.raises(ValueError, match="'backend' is now called 'kernel'"):
        TrainConfig.from_dict({"backend": "exact"})
    (tmp_path / "old.yaml").write_text("backend: rff\n")
    with pytest.raises(ValueError, match="'backend' is now called 'kernel'"):
        TrainConfig.from_yaml(tmp_path / "old.yaml")
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--backend", "nystrom"])
    assert exit_.value.code == 2
    assert "--backend is now --kernel: write --kernel nystrom" in capsys.readouterr().err
    assert DLMSVDD(kernel="nystrom").config.kernel == "nystrom"
    assert LpSVDD().get_params()["kernel"] == "auto" and TrainConfig().kernel == "auto"


def test_models_saved_with_backend_still_load(tmp_path):
    """A model.pt written before the rename stores ``backend`` in its configuration: read as ``kernel``."""
    X = _rows(200)
    model = DLMSVDD(**FAST, kernel="rff", n_components=32).fit(X)
    model.save(tmp_path / "model.pt")
    state = torch.load(tmp_path / "model.pt", weights_only=False)
    config = dict(state["config"])
    config["backend"] = config.pop("kernel")
    state["config"] = config
    torch.save(state, tmp_path / "old.pt")
    loaded = DLMSVDD.load(tmp_path / "old.pt")
    assert loaded.config.kernel == "rff"
    np.testing.assert_array_equal(loaded.dissimilarity(X[:10]), model.dissimilarity(X[:10]))
    assert checkpoints.upgraded_config({"backend": "rff", "seed": 1}) == {"kernel": "rff", "seed": 1}


# ---- a long exact fit: said up front, with progress

def test_the_cost_estimate_follows_its_formula(monkeypatch):
    monkeypatch.setattr(kernel_choice, "_seconds_per_entry", lambda d, dtype, device: 1e-9)
    n = 400_000
    on_the_fly = kernel_choice.exact_cost(n, 10, torch.float32, "cpu", cache_size=1.0)
    assert not on_the_fly["materialised"] and on_the_fly["matrix_bytes"] == n * n * 4
    assert on_the_fly["product_seconds"] == pytest.approx(n * n * 1e-9)
    assert on_the_fly["seconds"] == pytest.approx(n * n * 1e-9 * kernel_choice.EXPECTED_PRODUCTS)
    held = kernel_choice.exact_cost(1000, 10, torch.float64, "cpu", cache_size=100.0)
    assert held["materialised"] and held["seconds"] == pytest.approx(1e-3 * (1 + 0.1 * kernel_choice.EXPECTED_PRODUCTS))


def test_a_forced_exact_kernel_on_many_rows_warns_before_it_starts(small_limit, monkeypatch):
    monkeypatch.setattr(kernel_choice, "_seconds_per_entry", lambda d, dtype, device: 1e-3)  # a slow machine

    def no_solve(*args, **kwargs):
        raise RuntimeError("the solver started")

    with monkeypatch.context() as patched, pytest.warns(kernel_choice.SlowFitWarning) as caught, \
            pytest.raises(RuntimeError, match="solver started"):
        patched.setattr("dlmsvdd_ext.svdd.solve", no_solve)
        LpSVDD(kernel="exact").fit(_rows(300))
    message = str(caught[0].message)
    # 300^2 entries at a millisecond each: 90 s a product, held in memory (+ a tenth of it per product)
    assert "kernel='exact' on 300 rows" in message and "about 90 s here" in message and "about 6 minutes" in message
    assert "kernel='auto'" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", kernel_choice.SlowFitWarning)
        LpSVDD(kernel="exact").fit(_rows(200))  # at the limit: no estimate, no warning
        LpSVDD().fit(_rows(300))  # "auto": Nystrom, nothing to warn about


def test_dlmsvdd_with_a_forced_exact_kernel_warns_before_its_first_epoch(small_limit, monkeypatch):
    monkeypatch.setattr(kernel_choice, "_seconds_per_entry", lambda d, dtype, device: 1e-3)
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DLMSVDD(**FAST, kernel="exact", epoch_rows=100, self_labelling=0.0).fit(
            _rows(400), callback=lambda row: seen.append(sum(w.category is kernel_choice.SlowFitWarning
                                                             for w in caught)))
    assert seen[0] == 1  # already said when the first epoch ended
    assert sum(w.category is kernel_choice.SlowFitWarning for w in caught) == 1  # and only once


def test_a_long_fit_shows_its_products(small_limit, monkeypatch, capsys):
    monkeypatch.setattr(kernel_choice, "PROGRESS_SECONDS", 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kernel_choice.SlowFitWarning)
        model = LpSVDD(kernel="exact").fit(_rows(300))
    err = capsys.readouterr().err
    assert "LpSVDD exact kernel, 300 rows" in err and "product" in err and model.converged_


def test_a_large_factor_shows_its_products(small_limit, monkeypatch, capsys):
    monkeypatch.setattr(kernel_choice, "PROGRESS_FACTOR_ENTRIES", 300 * 64)
    LpSVDD(n_components=64).fit(_rows(299))  # 299 x 64 entries: below, no bar
    assert "LpSVDD" not in capsys.readouterr().err
    LpSVDD(n_components=64).fit(_rows(300))
    assert "LpSVDD nystrom kernel, 300 rows" in capsys.readouterr().err


def test_the_progress_operator_counts_every_product():
    from dlmsvdd_ext.kernel_operator import exact_rbf_operator
    from dlmsvdd_ext.progress import ProductProgress

    X = torch.as_tensor(_rows(50), dtype=torch.float64)
    plain = exact_rbf_operator(X, 0.5)
    counted = ProductProgress(plain, 10, "test")
    v = torch.ones(50, dtype=torch.float64)
    torch.testing.assert_close(counted.matvec(v), plain.matvec(v))
    counted.matvec(v)
    assert counted._bar.n == 2 and counted.n == plain.n
    counted.close()


# ---- the epochs' rows

def _split_rows(n, n_anomalies, d=3):
    targets = np.ones(n, dtype=int)
    targets[:n_anomalies] = -1
    rows = torch.as_tensor(_rows(n, d))
    return protocols.SplitRows(rows, protocols.Split(np.arange(n), targets))


def test_each_epoch_draws_its_rows_and_keeps_the_labelled_anomalies(small_limit):
    train = _split_rows(1000, 7)
    first, second = epoch_rows.draw(train, 100, seed=0, epoch=0), epoch_rows.draw(train, 100, seed=0, epoch=1)
    assert len(first) == len(second) == 100
    for drawn in (first, second):
        assert (drawn.targets < 0).sum() == 7  # every labelled anomaly
        assert len(np.unique(drawn.indices)) == 100
    assert not np.array_equal(first.indices, second.indices)  # each epoch other rows
    np.testing.assert_array_equal(first.indices, epoch_rows.draw(train, 100, seed=0, epoch=0).indices)  # seeded
    x, t = first[5]
    torch.testing.assert_close(x, train[int(first.indices[5])][0])
    assert t == train.targets[first.indices[5]]


def test_no_draw_for_small_sets_or_zero_and_at_most_half_anomalies(monkeypatch):
    train = _split_rows(100, 80)
    monkeypatch.setattr(kernel_choice, "EXACT_MAX_ROWS", 100)
    assert epoch_rows.draw(train, 40, 0, 0) is train  # the exact kernel takes it whole: every row
    monkeypatch.setattr(kernel_choice, "EXACT_MAX_ROWS", 50)
    assert epoch_rows.draw(train, 100, 0, 0) is train and epoch_rows.draw(train, 0, 0, 0) is train
    drawn = epoch_rows.draw(train, 40, 0, 0)
    assert len(drawn) == 40 and (drawn.targets < 0).sum() == 20
    few_normals = epoch_rows.draw(train, 60, 0, 0)  # 20 normal rows: all of them, and 40 anomalies
    assert (few_normals.targets > 0).sum() == 20 and (few_normals.targets < 0).sum() == 40


def test_epoch_rows_is_the_mlps_recipe_only():
    assert TrainConfig(data="table").training_params()["epoch_rows"] == 4096
    assert TrainConfig(data="digits").training_params()["epoch_rows"] == 0
    assert TrainConfig(data="table", epoch_rows=0).training_params()["epoch_rows"] == 0
    with pytest.raises(ValueError, match="epoch_rows"):
        TrainConfig(epoch_rows=-1).validate()


# ---- batches sliced whole: the same batches as torch's row-by-row loader

def _datasets():
    split = _split_rows(103, 9)
    relabelled = self_labels.Relabelled(split, -split.targets)
    return {"split rows": split, "relabelled": relabelled, "epoch rows": epoch_rows.EpochRows(relabelled, np.arange(5, 65)),
            "tensors": TensorDataset(torch.as_tensor(_rows(103)), torch.arange(103))}


@pytest.mark.parametrize("name", list(_datasets()))
@pytest.mark.parametrize("shuffle", [False, True])
def test_sliced_batches_equal_the_row_by_row_ones(name, shuffle):
    data = _datasets()[name]
    assert batches.can_take(data)
    drop_last = shuffle
    sliced = list(batches.loader(data, 16, shuffle, seed=4, drop_last=drop_last))
    rows = list(DataLoader(data, batch_size=16, shuffle=shuffle, generator=torch.Generator().manual_seed(4),
                           drop_last=drop_last))
    assert len(sliced) == len(rows) == (len(data) // 16 if drop_last else -(-len(data) // 16))
    for (x, t), (x_ref, t_ref) in zip(sliced, rows):
        torch.testing.assert_close(x, x_ref)
        torch.testing.assert_close(t, t_ref)


def test_the_loader_draws_nothing_from_torchs_global_generator():
    data = _datasets()["split rows"]
    torch.manual_seed(0)
    list(batches.loader(data, 16, shuffle=True, seed=1))
    after_sliced = torch.rand(1)
    torch.manual_seed(0)
    list(DataLoader(data, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1)))
    assert torch.equal(after_sliced, torch.rand(1))


# ---- memory: the fitted model keeps no training factor, and scores in blocks

@pytest.mark.parametrize("kernel", ["nystrom", "rff"])
def test_a_fit_keeps_no_training_factor_and_scores_in_blocks(kernel, monkeypatch):
    X, Z = _rows(300), _rows(1000, seed=1)
    model = LpSVDD(kernel=kernel, n_components=64, random_state=0).fit(X)
    assert not hasattr(model.backend_, "Z_") and model.factor_columns_ == model.feature_weights_.shape[0]
    whole = model.dissimilarity(Z)
    monkeypatch.setattr(type(model.backend_), "FACTOR_ROWS", 128)  # 8 blocks, the last one short
    np.testing.assert_allclose(model.dissimilarity(Z), whole, rtol=1e-6, atol=1e-6)
    # the reference: the map on all rows at once, then the score's formula
    z = model.backend_.transform(torch.as_tensor(Z))
    w = model.feature_weights_
    expected = ((z - w).square().sum(1) if model.distance_scores_ else 1 - 2 * z @ w + model.aKa_).numpy()
    np.testing.assert_allclose(whole, expected, rtol=1e-5, atol=1e-6)
