"""The alternating trainer on digits with the small CNN: every backend family,
checkpoints, frozen backbone, bandwidth strategies (the loss: test_margin_loss.py)."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from dlmsvdd import datasets, metrics, tasks
from dlmsvdd.training.config import TrainConfig
from dlmsvdd.training import thresholds
from dlmsvdd.training.models import SmallCNN
from dlmsvdd.training.trainer import DLMSVDD


@pytest.fixture(scope="module")
def digits_source():
    return datasets.digits()


@pytest.fixture(scope="module")
def task(digits_source):
    return tasks.make_task(digits_source, normal_class=4, ratio=0.5, seed=0)


def _config(**kw):
    """The paper's loop as it was (no step 0), on the small CNN from scratch; the scratch
    recipe's step 0 has its own tests (test_pretrain.py)."""
    base = dict(backbone="small_cnn", weights=None, recipe="paper", epochs=12, lr=1e-3, batch_size=64,
                n_components=64, verbose=0)
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module", params=["exact", "nystrom", "rff"])
def fitted(request, task):
    """One fit per backend family: exact, data-dependent, spectral."""
    return DLMSVDD(_config(kernel=request.param)).fit(task.train, task.val)


def test_fit_lowers_the_loss_and_detects(fitted, task):
    losses = [row["omega_loss"] for row in fitted.history_ if "omega_loss" in row]
    assert len(losses) == 12 and len(fitted.history_) == 13
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    for row in fitted.history_:
        assert row["gap"] <= 1e-6 * row["objective"] * 1.0001 or row["n_iter"] == 1000
        assert row["b_normal"] < row["b_anomaly"]
        assert 0 <= row["val_auroc"] <= 1
    result = fitted.evaluate(task.test)
    assert result["auroc"] > 0.9  # digits one-vs-rest is easy; chance is 0.5
    assert result["n"] == len(task.test)


def test_scores_predict_and_threshold_agree(fitted, task):
    f = fitted.dissimilarity(task.test)
    np.testing.assert_array_equal(fitted.score_samples(task.test), -f)
    np.testing.assert_array_equal(fitted.predict(task.test), np.where(f >= fitted.threshold_, -1, 1))
    # the threshold maximises balanced accuracy on the validation set
    f_val = fitted.dissimilarity(task.val)
    best = metrics.balanced_accuracy(task.val.targets, f_val, fitted.threshold_)
    for thr in np.unique(f_val):
        assert metrics.balanced_accuracy(task.val.targets, f_val, thr) <= best + 1e-12


def test_best_epoch_is_the_best_validation_epoch(fitted):
    aurocs = [row["val_auroc"] for row in fitted.history_]
    assert aurocs[fitted.best_epoch_] == max(aurocs)
    assert fitted.best_epoch_ == len(aurocs) - 1 - aurocs[::-1].index(max(aurocs))  # the last of ties


def test_save_load_scores_identically(fitted, task, tmp_path):
    path = tmp_path / "model.pt"
    fitted.save(path)
    loaded = DLMSVDD.load(path)
    np.testing.assert_array_equal(loaded.dissimilarity(task.test), fitted.dissimilarity(task.test))
    np.testing.assert_array_equal(loaded.predict(task.test), fitted.predict(task.test))
    assert loaded.threshold_ == fitted.threshold_ and loaded.config == fitted.config
    assert torch.load(path, weights_only=True)["versions"]["torch"] == torch.__version__


def _shape(model) -> tuple[int, int]:
    """The small CNN's (width, branches)."""
    cnn = model.network_.backbone
    return cnn.layers[0].out_channels // cnn.branches, cnn.branches


def test_the_small_cnn_has_the_shape_asked_for_and_reloads_at_it(task, tmp_path):
    """cnn_width and cnn_branches shape the small CNN (32 wide; 4 branches from scratch, 1 for
    the paper); a model reloads at the shape it was trained with: a small CNN started from a
    weights file, whose reloaded configuration has no weights (so its recipe would be another),
    and checkpoints written before cnn_width (32, one branch) or cnn_branches (one) existed."""
    wide = DLMSVDD(_config(recipe="auto", epochs=1, cnn_width=64)).fit(task.train, task.val)
    assert _shape(wide) == (64, 4) and wide.network_.backbone.out_features == 4 * 256
    default = DLMSVDD(_config(recipe="auto", epochs=1)).fit(task.train, task.val)
    assert _shape(default) == (32, 4)
    torch.save(SmallCNN(1).state_dict(), tmp_path / "start.pt")
    from_file = DLMSVDD(_config(recipe="auto", epochs=1, weights=str(tmp_path / "start.pt"))).fit(task.train, task.val)
    assert from_file.training_params_["recipe"] == "paper" and _shape(from_file) == (32, 1)
    for name, model in (("wide", wide), ("from_file", from_file)):
        model.save(tmp_path / f"{name}.pt")
        loaded = DLMSVDD.load(tmp_path / f"{name}.pt")
        assert _shape(loaded) == _shape(model)
        np.testing.assert_array_equal(loaded.dissimilarity(task.val), model.dissimilarity(task.val))
    for missing in (["cnn_width", "cnn_branches"], ["cnn_branches"]):
        old = torch.load(tmp_path / "from_file.pt", weights_only=True)
        for key in missing:
            del old["config"][key]
        old["config"]["weights"] = None  # as a scratch model of before
        torch.save(old, tmp_path / "old.pt")
        loaded = DLMSVDD.load(tmp_path / "old.pt")
        assert _shape(loaded) == (32, 1)
        np.testing.assert_array_equal(loaded.dissimilarity(task.val), from_file.dissimilarity(task.val))


def test_branches_normalised_as_one_vector_train_and_reload_so(task, tmp_path):
    """cnn_branch_norm=False builds the small CNN whose branches are normalised as one vector, and a
    model reloads so; a model written before the field reloads with each branch normalised apart (its
    network then), scoring as it did."""
    whole = DLMSVDD(_config(recipe="auto", epochs=1, cnn_branches=2, cnn_branch_norm=False)).fit(task.train, task.val)
    apart = DLMSVDD(_config(recipe="auto", epochs=1, cnn_branches=2)).fit(task.train, task.val)
    assert not whole.network_.backbone.branch_norm and apart.network_.backbone.branch_norm
    assert whole.training_params_["cnn_branch_norm"] is False and apart.training_params_["cnn_branch_norm"] is True
    for name, model in (("whole", whole), ("apart", apart)):
        model.save(tmp_path / f"{name}.pt")
        loaded = DLMSVDD.load(tmp_path / f"{name}.pt")
        assert loaded.network_.backbone.branch_norm == model.network_.backbone.branch_norm
        np.testing.assert_array_equal(loaded.dissimilarity(task.val), model.dissimilarity(task.val))
    old = torch.load(tmp_path / "apart.pt", weights_only=True)
    del old["config"]["cnn_branch_norm"]
    del old["network_shape"]["cnn_branch_norm"]
    torch.save(old, tmp_path / "old.pt")
    loaded = DLMSVDD.load(tmp_path / "old.pt")
    assert loaded.network_.backbone.branch_norm
    np.testing.assert_array_equal(loaded.dissimilarity(task.val), apart.dissimilarity(task.val))


def test_the_final_boundary_is_refitted_on_the_best_weights(fitted, task):
    """Refitting the same weights' features from scratch gives the boundary the model holds."""
    feats, targets = fitted._features(task.train)
    from dlmsvdd_ext import LpSVDD

    params = {**fitted.svdd_.get_params(), "gamma": fitted.svdd_.gamma_, "warm_start": False}  # the bandwidth it holds
    fresh = LpSVDD(**params).fit(feats, targets)
    assert fresh.objective_ == pytest.approx(fitted.svdd_.objective_, rel=1e-5)
    assert fresh.b_normal_ == pytest.approx(fitted.svdd_.b_normal_, rel=1e-3, abs=1e-4)


def test_frozen_backbone_keeps_its_weights(task):
    net = SmallCNN(1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    model = DLMSVDD(_config(frozen=True), backbone=net).fit(task.train, task.val)
    after = model.network_.backbone.state_dict()  # on the model's device (a GPU under device "auto")
    assert all(torch.equal(before[k], after[k].cpu()) for k in before)
    assert len(model.history_) == 1 and "omega_loss" not in model.history_[0]


def test_custom_backbone_checkpoint_needs_the_module(task, tmp_path):
    model = DLMSVDD(_config(epochs=1), backbone=SmallCNN(1, width=8)).fit(task.train, task.val)
    model.save(tmp_path / "m.pt")
    with pytest.raises(ValueError, match="custom backbone"):
        DLMSVDD.load(tmp_path / "m.pt")
    loaded = DLMSVDD.load(tmp_path / "m.pt", backbone=SmallCNN(1, width=8))
    np.testing.assert_array_equal(loaded.dissimilarity(task.val), model.dissimilarity(task.val))


def test_same_seed_same_model(task):
    runs = [DLMSVDD(_config(epochs=2)).fit(task.train, task.val) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].dissimilarity(task.val), runs[1].dissimilarity(task.val))


def test_bandwidth_strategies(task):
    gammas = {}
    for gamma in ("median", "per-epoch", 2.5):
        model = DLMSVDD(_config(epochs=3, gamma=gamma)).fit(task.train, task.val)
        gammas[gamma] = [row["gamma"] for row in model.history_]
    assert len(set(gammas["median"])) == 1  # estimated once, from the initial features
    assert gammas["per-epoch"][0] == gammas["median"][0] and len(set(gammas["per-epoch"])) > 1
    assert gammas[2.5] == [2.5] * 4


def test_softplus_scale_auto_is_the_recipes_with_labels_and_1_without(task):
    """softplus_scale="auto" trains as the recipe's value given explicitly with labelled anomalies (4
    from scratch, 1 in the paper's recipe) and at 1 without them."""
    def fit(t, **kw):
        model = DLMSVDD(_config(epochs=2, recipe="scratch", cnn_branches=1, **kw)).fit(t.train, t.val)
        return model.softplus_scale_, [row["omega_loss"] for row in model.history_[:-1]]

    scale, auto = fit(task)
    assert scale == 4.0 and fit(task, softplus_scale=4.0) == (4.0, auto)
    assert fit(task, softplus_scale=1.0)[1] != auto
    assert DLMSVDD(_config(epochs=1)).fit(task.train, task.val).softplus_scale_ == 1.0
    one_class = tasks.make_task(datasets.digits(), normal_class=4, ratio=0.0, seed=0)
    one_class_auto = fit(one_class)
    assert one_class_auto == fit(one_class, softplus_scale=1.0) and one_class_auto[0] == 1.0


def test_lr_left_to_the_recipe_is_its_labelled_lr_with_labels_and_its_lr_without(task):
    """With lr left to the recipe the omega-steps train at the recipe's "labelled_lr" with labelled
    anomalies (2e-3 from scratch on images, 1e-4 in the paper's recipe) and at its "lr" without
    them (1e-3 from scratch), as those values given explicitly do; a value given wins with labels."""
    from dlmsvdd.training import config

    def fit(t, **kw):
        base = dict(epochs=2, recipe="scratch", cnn_branches=1, lr=None)
        model = DLMSVDD(_config(**{**base, **kw})).fit(t.train, t.val)
        return {row["lr"] for row in model.history_[:-1]}, [row["omega_loss"] for row in model.history_[:-1]]

    rates, auto = fit(task)
    assert rates == {config.SCRATCH_IMAGES_LABELLED_LR} == {2e-3} and fit(task, lr=2e-3) == (rates, auto)
    given = fit(task, lr=1e-3)
    assert given[0] == {1e-3} and given[1] != auto
    assert fit(task, recipe="paper")[0] == {1e-4}
    one_class = tasks.make_task(datasets.digits(), normal_class=4, ratio=0.0, seed=0)
    one_class_rates, one_class_auto = fit(one_class)
    assert one_class_rates == {1e-3} and fit(one_class, lr=1e-3) == (one_class_rates, one_class_auto)


def test_ema_half_life_left_to_the_recipe_is_its_labelled_one_with_labels_and_none_without(task):
    """With ema_half_life left to the recipe a network from scratch on images judges its epochs on the
    weights' moving average with labelled anomalies (half-life SCRATCH_IMAGES_EMA_HALF_LIFE epochs), as
    that value given does, and on its own weights without labels and in the paper's recipe (0)."""
    from dlmsvdd.training import config

    def fit(t, **kw):
        base = dict(epochs=2, recipe="scratch", cnn_branches=1, lr=None)
        model = DLMSVDD(_config(**{**base, **kw})).fit(t.train, t.val)
        return ({row["ema_half_life"] for row in model.history_[:-1]},
                [row["omega_loss"] for row in model.history_[:-1]] + [row["b_normal"] for row in model.history_])

    half_lives, auto = fit(task)
    assert half_lives == {config.SCRATCH_IMAGES_EMA_HALF_LIFE} == {1.0}
    assert fit(task, ema_half_life=1.0) == (half_lives, auto)
    none = fit(task, ema_half_life=0)
    assert none[0] == {0.0} and none[1][0] == auto[0] and none[1] != auto  # epoch 1 on: other weights
    assert fit(task, recipe="paper")[0] == {0.0}
    one_class = tasks.make_task(datasets.digits(), normal_class=4, ratio=0.0, seed=0)
    assert fit(one_class)[0] == {0.0}


@pytest.mark.filterwarnings("ignore::dlmsvdd.training.thresholds.InSampleThreshold")  # no validation set
def test_the_kept_weights_are_the_average_the_epochs_were_judged_on(task, tmp_path):
    """With an average the kept epoch's weights are the average's, not the network's own: without a
    validation set the last epoch is kept, and the fitted network is the final training state's
    average (every optimiser step in it); without one, the network's own weights."""
    from dlmsvdd.training import checkpoints

    def fit(half_life):
        path = tmp_path / f"state-{half_life}.pt"
        model = DLMSVDD(_config(epochs=3, ema_half_life=half_life)).fit(task.train, None, checkpoint=path)
        return model, checkpoints.read(path, checkpoints.TRAINING)

    model, state = fit(1.0)
    assert model.best_epoch_ == 3 and state["average"]["steps"] == 3 * (len(task.train) // 64)
    kept = {k: v for k, v in model.network_.state_dict().items() if k.startswith("backbone.")}
    for key, value in kept.items():
        torch.testing.assert_close(value.cpu(), state["average"]["state"][key], rtol=0, atol=0)
    assert any(not torch.equal(state["network"][k], state["average"]["state"][k]) for k in kept)
    model, state = fit(0)
    assert state["average"] is None
    for key, value in model.network_.state_dict().items():
        if key.startswith("backbone."):
            torch.testing.assert_close(value.cpu(), state["network"][key], rtol=0, atol=0)


def test_bad_configuration_is_refused():
    for bad, match in ((dict(p=1.0), "p must be >= 1.1"), (dict(nu=0.5), "nu must be >= 1"),
                       (dict(contamination=0.7), r"contamination must be a number in \(0, 0.5\]"),
                       (dict(kernel="svd"), "kernel must be one of"), (dict(gamma=-1.0), "gamma must be"),
                       (dict(ratio=-0.5), "ratio must be a number in"), (dict(backbone="vgg"), "backbone must be one of")):
        with pytest.raises(ValueError, match=match):
            DLMSVDD(_config(**bad))
    with pytest.raises(ValueError, match="unknown configuration keys"):
        TrainConfig.from_dict({"epochs": 3, "learning_rate": 0.1})


def test_a_network_from_scratch_is_featured_with_the_training_images_statistics():
    """Issue 16's cause: a network from scratch kept BatchNorm's initial statistics (mean 0,
    variance 1) in the eval-mode features pass, so the first epochs' boundary and the median
    bandwidth were fitted on features of a network whose BatchNorm did nothing. Now the
    default recipe sets them from the training images: the first BatchNorm layer standardises
    its input over the training set in eval mode."""
    task = tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)
    model = DLMSVDD(TrainConfig(backbone="small_cnn", weights=None, epochs=0, verbose=0)).fit(task.train, task.val)
    x = torch.stack([task.train[i][0] for i in range(len(task.train))]).to(model.device)
    layers = model.network_.backbone.layers.eval()
    with torch.no_grad():
        z = layers[1](layers[0](x)).double().cpu()
    mean, var = z.mean(dim=(0, 2, 3)), z.var(dim=(0, 2, 3))
    bn = layers[1]
    np.testing.assert_allclose(mean, bn.bias.double().detach().cpu(), atol=1e-4)
    np.testing.assert_allclose(var, bn.weight.double().detach().cpu() ** 2, rtol=1e-2)


# ---- decisions without labelled anomalies in validation (issue 14, item 1)

def _normals_only(split):
    """The split without its anomalies (a validation set with none labelled)."""
    return torch.utils.data.Subset(split, np.flatnonzero(split.targets > 0))


def test_threshold_without_validation_anomalies_is_the_conformal_rule_on_normal_scores(task):
    """Without anomalies in validation the threshold was r^2, which called every
    test sample anomalous (balanced accuracy 0.5); then the 90% quantile of the
    held-out normals' scores; now (issue 46) the rule p-value <= 0.1 over them:
    above the smallest validation score t with (1 + #{scores > t}) / (n + 1) <= 0.1."""
    val = _normals_only(task.val)
    model = DLMSVDD(_config(frozen=True)).fit(task.train, val)
    assert model.evaluate(task.test)["balanced_accuracy"] > 0.75
    assert model.threshold_rule_ == "validation normals: p-value <= 0.1"
    f_val = model.dissimilarity(val).astype(np.float64)
    n = len(f_val)
    t = next(t for t in sorted(f_val) if (1 + np.sum(f_val > t)) / (n + 1) <= 0.1)  # a plain search
    assert model.threshold_ == np.nextafter(t, np.inf)  # f >= threshold_ is f > t: p-value <= 0.1
    assert (model.predict(val) == -1).sum() == np.sum(f_val > t)
    # no validation at all: the training normals' quantile, in-sample, said; "radius": the sphere, on request
    with pytest.warns(thresholds.InSampleThreshold, match="no validation normals.*scores of rows the model was "
                                                          "fitted on"):
        alone = DLMSVDD(_config(frozen=True, contamination=0.05)).fit(task.train)
    f_train, t_train = alone.scores(task.train)
    assert alone.threshold_rule_ == "training normals' 0.95 quantile (in-sample)"
    assert alone.threshold_ == np.percentile(f_train[t_train > 0], 95)
    radius = DLMSVDD(_config(frozen=True, contamination="radius")).fit(task.train, task.val)
    assert radius.threshold_rule_ == "radius" and radius.threshold_ == radius.svdd_.r2_
    # with both classes in validation: the balanced-accuracy threshold, as before
    both = DLMSVDD(_config(frozen=True)).fit(task.train, task.val)
    assert both.threshold_rule_ == "validation balanced accuracy"
    assert both.threshold_ == metrics.best_threshold(*reversed(both.scores(task.val)))


def test_alpha_steps_without_certificate_are_recorded_and_warned_once(task):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DLMSVDD(_config(epochs=2, fw_max_iter=1)).fit(task.train, task.val)
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == 1 and "epochs [0, 1, 2] and in the final refit" in str(convergence[0].message)
    assert [row["converged"] for row in model.history_] == [False] * 3
    assert all(row["n_iter"] == 1 for row in model.history_)
