"""Step 0 for a backbone from scratch (issue 16): the BatchNorm statistics on the
training images, the autoencoder, Deep SAD's training (issue 50), and the recipes
that choose them."""

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from dlmsvdd import datasets, tasks
from dlmsvdd.training import deep_sad, pretrain
from dlmsvdd.training.config import BUDGET_ROWS, ONE_BRANCH_WORK, TrainConfig, epochs_for
from dlmsvdd.training.models import FeatureNet, SmallCNN
from dlmsvdd.training.trainer import DLMSVDD


@pytest.fixture(scope="module")
def task():
    return tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)


def _images(split) -> torch.Tensor:
    return torch.stack([split[i][0] for i in range(len(split))])


def _first_bn_reference(net: SmallCNN, x: torch.Tensor):
    """The first BatchNorm layer's input statistics over all of x: mean and unbiased variance per channel."""
    with torch.no_grad():
        z = net.layers[0](x.to(next(net.parameters()).device)).double().cpu()  # the net may be on a GPU
    return z.mean(dim=(0, 2, 3)), z.permute(1, 0, 2, 3).flatten(1).var(dim=1, unbiased=True)


def test_calibrate_batchnorm_sets_the_data_statistics(task):
    x = _images(task.train)
    torch.manual_seed(0)
    net = SmallCNN(1)
    weights = {k: v.clone() for k, v in net.state_dict().items() if "running" not in k and "num_batches" not in k}
    loader = DataLoader(TensorDataset(x, torch.ones(len(x))), batch_size=len(x))
    assert pretrain.calibrate_batchnorm(net, loader) == 3
    mean, var = _first_bn_reference(net, x)
    bn = net.layers[1]
    np.testing.assert_allclose(bn.running_mean.double(), mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.double(), var, rtol=1e-4, atol=1e-6)
    assert all(m.momentum == 0.1 for m in net.modules() if isinstance(m, nn.BatchNorm2d))  # restored
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in weights.items())  # no weight changed


def test_calibrate_batchnorm_averages_the_batches(task):
    """Several batches: the running mean is the mean of the batches' means (PyTorch's cumulative average)."""
    x = _images(task.train)[:96]
    torch.manual_seed(0)
    net = SmallCNN(1)
    pretrain.calibrate_batchnorm(net, DataLoader(TensorDataset(x, torch.ones(96)), batch_size=32))
    means = torch.stack([_first_bn_reference(net, x[i:i + 32])[0] for i in range(0, 96, 32)])
    np.testing.assert_allclose(net.layers[1].running_mean.double(), means.mean(0), rtol=1e-4, atol=1e-6)


def test_autoencoder_loss_falls(task):
    x = _images(task.train)
    torch.manual_seed(0)
    net = FeatureNet(SmallCNN(1))
    loader = DataLoader(TensorDataset(x, torch.ones(len(x))), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    losses = pretrain.autoencoder(net, loader, steps=60, lr=1e-3)
    assert len(losses) == 60
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    # the loss it reports is the reconstruction error of the pooled image (here the 8x8 image itself)
    assert pretrain.target(x).shape == (len(x), 64)


def test_reconstruction_target_pools_large_images():
    x = torch.arange(2 * 3 * 32 * 32, dtype=torch.float32).reshape(2, 3, 32, 32)
    expected = x.numpy().reshape(2, 3, 16, 2, 16, 2).mean(axis=(3, 5)).reshape(2, -1)
    np.testing.assert_allclose(pretrain.target(x).numpy(), expected, rtol=1e-6)


def _deep_sad_loss_reference(w: np.ndarray, x: np.ndarray, t: np.ndarray, c: np.ndarray) -> float:
    """Deep SAD's loss of a linear network x @ w.T, in float64 from its paper: the mean over rows of
    d = ||phi(x) - c||^2 for normals, 1 / (d + 1e-6) for labelled anomalies."""
    d = ((x @ w.T - c) ** 2).sum(1)
    return float(np.where(t > 0, d, 1.0 / (d + 1e-6)).mean())


def test_deep_sad_step_0_takes_adams_steps_on_its_loss_around_the_normals_centre():
    """The centre is the initial normals' mean output (coordinates within 0.1 of 0 pushed out), and
    one step is Adam's first step on the paper's loss: each weight moves by lr * g / (|g| + eps),
    g the gradient, here taken by central differences of the float64 reference."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3))
    t = np.array([1] * 9 + [-1] * 3)
    net = nn.Linear(3, 2, bias=False).double()
    w0 = net.weight.detach().numpy().copy()
    c = (x[t > 0] @ w0.T).mean(0)
    c = np.where(np.abs(c) < 0.1, np.where(c < 0, -0.1, 0.1), c)
    rows = DataLoader(TensorDataset(torch.as_tensor(x), torch.as_tensor(t)), batch_size=5)
    batch = DataLoader(TensorDataset(torch.as_tensor(x), torch.as_tensor(t)), batch_size=12)
    losses = pretrain.deep_sad(net, batch, rows, steps=1, lr=0.01)
    assert losses == pytest.approx([_deep_sad_loss_reference(w0, x, t, c)], rel=1e-9)
    h, g = 1e-6, np.zeros_like(w0)
    for i in np.ndindex(*w0.shape):
        step = np.zeros_like(w0)
        step[i] = h
        g[i] = (_deep_sad_loss_reference(w0 + step, x, t, c) - _deep_sad_loss_reference(w0 - step, x, t, c)) / (2 * h)
    np.testing.assert_allclose(net.weight.detach().numpy(), w0 - 0.01 * g / (np.abs(g) + 1e-8), rtol=0, atol=1e-7)


def test_deep_sad_step_0_pulls_normals_in_apart_from_the_anomalies(task):
    x, t = _images(task.train), torch.as_tensor(task.train.targets)
    torch.manual_seed(0)
    net = SmallCNN(1)
    rows = DataLoader(TensorDataset(x, t), batch_size=256)
    pretrain.calibrate_batchnorm(net, rows)
    with torch.no_grad():
        net.eval()
        before = net(x)
    c = deep_sad.centre(before, t.numpy())
    loader = DataLoader(TensorDataset(x, t), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    losses = pretrain.deep_sad(net, loader, rows, steps=40, lr=2e-3, grad_clip=1.0)
    assert len(losses) == 40
    with torch.no_grad():
        net.eval()
        after = net(x)
    d0, d1 = deep_sad.distance(before, c), deep_sad.distance(after, c)
    normal = t > 0
    assert d1[normal].mean() < 0.5 * d0[normal].mean()
    # the anomalies stay out: their distance against the normals' grows
    assert d1[~normal].mean() / d1[normal].mean() > 2 * d0[~normal].mean() / d0[normal].mean()


def test_deep_sads_centre_needs_normal_rows():
    with pytest.raises(ValueError, match="needs normal training rows"):
        deep_sad.centre(torch.zeros(3, 2), np.array([-1, -1, -1]))


IMAGE_SCHEDULE = "constant"  # the scratch recipe's on images (docs/user-guide/detector.md, Recipes)


def test_recipes():
    scratch = TrainConfig(backbone="small_cnn", weights=None).validate()
    assert scratch.training_params() == {"backbone": "small_cnn", "recipe": "scratch", "lr": 1e-3,
                                         "labelled_lr": 2e-3, "lr_schedule": IMAGE_SCHEDULE,
                                         "pretrain": "batchnorm", "selection_rule": "latest", "epochs": 30,
                                         "cnn_width": 32, "cnn_branches": 4, "cnn_branch_norm": True,
                                         "self_labelling": 0.0,
                                         "epoch_rows": 0, "budget_rows": BUDGET_ROWS, "labelled_nu": 5.0,
                                         "labelled_slack_scale": 10.0, "labelled_softplus_scale": 4.0,
                                         "labelled_ema_half_life": 1.0,
                                         "labelled_deep_sad_weight": 3.0}
    paper = {"recipe": "paper", "lr": 1e-4, "labelled_lr": 1e-4, "lr_schedule": "constant", "pretrain": "none", "selection_rule": "best", "epochs": 30,
             "self_labelling": 0.0, "epoch_rows": 0, "budget_rows": 0, "labelled_nu": 1.2,
             "labelled_slack_scale": 1.0, "labelled_softplus_scale": 1.0, "labelled_ema_half_life": 0.0,
             "labelled_deep_sad_weight": 0.0}
    assert TrainConfig().validate().training_params()["recipe"] == "scratch"  # the default: small CNN, no weights
    # the paper's ResNet-50, which no shape field of the small CNN or the MLP concerns
    assert TrainConfig(weights="imagenet").validate().training_params() == {"backbone": "resnet50", **paper}
    assert TrainConfig(backbone="custom", weights=None).training_params()["recipe"] == "paper"
    assert TrainConfig(backbone="small_cnn", weights=None, recipe="paper").training_params() == {
        "backbone": "small_cnn", **paper, "cnn_width": 32, "cnn_branches": 1, "cnn_branch_norm": True}
    given = TrainConfig(backbone="small_cnn", weights=None, lr=0.01, pretrain="autoencoder", selection_rule="best",
                        cnn_width=16, cnn_branches=2)
    assert given.training_params() == {"backbone": "small_cnn", "recipe": "scratch", "lr": 0.01,
                                       "labelled_lr": 2e-3, "lr_schedule": IMAGE_SCHEDULE,
                                       "pretrain": "autoencoder", "selection_rule": "best", "epochs": 30,
                                       "cnn_width": 16, "cnn_branches": 2, "cnn_branch_norm": True,
                                       "self_labelling": 0.0, "epoch_rows": 0,
                                       "budget_rows": BUDGET_ROWS, "labelled_nu": 5.0,
                                       "labelled_slack_scale": 10.0, "labelled_softplus_scale": 4.0,
                                       "labelled_ema_half_life": 1.0,
                                         "labelled_deep_sad_weight": 3.0}
    # feature vectors: the MLP, its shape from the same recipe
    assert TrainConfig().training_params(vectors=True) == {"backbone": "mlp", "recipe": "scratch", "lr": 1e-3,
                                                           "labelled_lr": 1e-3, "lr_schedule": "constant",
                                                           "pretrain": "batchnorm", "selection_rule": "latest",
                                                           "epochs": 15, "mlp_width": 128, "mlp_layers": 2,
                                                           "self_labelling": 0.05, "epoch_rows": 4096,
                                                           "budget_rows": 0, "labelled_nu": 1.2,
                                                           "labelled_slack_scale": 1.0, "labelled_softplus_scale": 1.0,
                                                           "labelled_ema_half_life": 0.0, "labelled_deep_sad_weight": 0.0}
    assert TrainConfig(data="table").training_params()["backbone"] == "mlp"
    # resolved when used: a changed backbone changes the recipe
    assert TrainConfig.from_dict({**scratch.to_dict(), "backbone": "resnet18", "weights": "imagenet"}
                                 ).training_params()["recipe"] == "paper"
    for bad, match in ((dict(recipe="fast"), "recipe must be one of"), (dict(pretrain="simclr"), "pretrain must be one of"),
                       (dict(pretrain_steps=-1), "pretrain_steps must be an integer >= 0"), (dict(lr=0.0), "lr must be a positive number"),
                       (dict(deep_sad_weight=-1.0), "deep_sad_weight must be"),
                       (dict(selection_rule="first"), "selection_rule must be one of"),
                       (dict(cnn_width=0), "cnn_width must be a positive integer or None"),
                       (dict(cnn_branches=0), "cnn_branches must be a positive integer or None"),
                       (dict(backbone="resnet18", cnn_width=64), "cnn_width shapes the small CNN"),
                       (dict(backbone="resnet50", weights="imagenet", cnn_branches=4), "cnn_branches shapes the small CNN")):
        with pytest.raises(ValueError, match=match):
            TrainConfig(**bad).validate()


def test_nu_and_slack_scale_auto_with_labels_are_the_recipes(task):
    """nu="auto" and slack_scale="auto" with labelled anomalies: 5 and 10 for the small CNN from scratch
    on images, the paper's 1.2 and 1 in its recipe; a number given wins; without anomalies 1 (one-class
    SVDD at the paper's slack penalties)."""
    fast = dict(backbone="small_cnn", weights=None, epochs=1, verbose=0)

    def boundary(data, **kw):
        svdd = DLMSVDD(TrainConfig(**fast, **kw)).fit(data, task.val if data is task.train else None).svdd_
        return svdd.nu_, svdd.slack_scale

    assert boundary(task.train) == (5.0, 10.0)
    assert boundary(task.train, recipe="paper") == (1.2, 1.0)
    assert boundary(task.train, nu=2.0, slack_scale=3.0) == (2.0, 3.0)
    normal = np.flatnonzero(task.train.targets > 0)
    one_class = torch.utils.data.Subset(task.train, normal)
    one_class.targets = task.train.targets[normal]
    assert boundary(one_class) == (1.0, 1.0)
    assert boundary(one_class, slack_scale=3.0) == (1.0, 3.0)


def _fit(task, **kw):
    config = TrainConfig(backbone="small_cnn", weights=None, epochs=0, verbose=0, **kw)
    return DLMSVDD(config).fit(task.train, task.val)


def test_the_autoencoder_runs_its_steps_and_the_paper_recipe_no_step_0(task):
    model = _fit(task, pretrain="autoencoder", pretrain_steps=5)
    assert len(model.pretrain_losses_) == 5
    # then the statistics: the first BatchNorm layer's are the training images' (as the default's)
    mean, _ = _first_bn_reference(model.network_.backbone, _images(task.train))
    np.testing.assert_allclose(model.network_.backbone.layers[1].running_mean.double().cpu(), mean, rtol=1e-4,
                               atol=1e-6)
    assert _fit(task).pretrain_losses_ == []
    paper = _fit(task, recipe="paper")
    assert paper.pretrain_losses_ == []
    bn = paper.network_.backbone.layers[1]  # the paper's path as before: BatchNorm untouched
    assert torch.equal(bn.running_mean, torch.zeros_like(bn.running_mean)) and int(bn.num_batches_tracked) == 0


def test_the_deep_sad_step_0_trains_the_backbone_at_the_omega_rate_then_takes_the_statistics(task, monkeypatch):
    """pretrain="deep_sad": its steps on the backbone's own outputs (phi normalises them after), at the
    rate the omega-steps take (with labelled anomalies the recipe's labelled_lr), then the BatchNorm
    statistics of the trained network."""
    calls = []

    def spy(network, loader, rows, steps, lr, *args):
        calls.append((network, steps, lr))
        return real(network, loader, rows, steps, lr, *args)

    real = pretrain.deep_sad
    monkeypatch.setattr(pretrain, "deep_sad", spy)
    model = _fit(task, pretrain="deep_sad", pretrain_steps=5)
    assert len(model.pretrain_losses_) == 5 and np.isfinite(model.pretrain_losses_).all()
    assert calls == [(model.network_.backbone, 5, model.training_params_["labelled_lr"])]
    mean, _ = _first_bn_reference(model.network_.backbone, _images(task.train))
    np.testing.assert_allclose(model.network_.backbone.layers[1].running_mean.double().cpu(), mean, rtol=1e-4,
                               atol=1e-6)
    start = _fit(task).network_.backbone  # the batchnorm step 0 of the same seed: the network before its steps
    assert not torch.equal(start.layers[0].weight, model.network_.backbone.layers[0].weight)
    one_class = torch.utils.data.Subset(task.train, np.flatnonzero(task.train.targets > 0))
    one_class.targets = task.train.targets[one_class.indices]
    calls.clear()
    DLMSVDD(TrainConfig(backbone="small_cnn", weights=None, epochs=0, verbose=0, pretrain="deep_sad",
                        pretrain_steps=2)).fit(one_class)
    assert calls[0][2] == model.training_params_["lr"]  # without labels: Deep SVDD's training at the recipe's lr


def test_pretrain_none_given_is_kept(task):
    """'none' is one of pretrain's options: it was read as None (the recipe's, i.e. step 0)
    when the model copied its configuration, so pretrain="none" and --pretrain none ran step 0."""
    assert TrainConfig.from_dict({"pretrain": "none"}).pretrain == "none"
    assert TrainConfig.from_dict({"pretrain": "None"}).pretrain == "none"  # any case: the option, not None
    assert TrainConfig.from_dict({"weights": "none"}).weights is None  # a field whose None is spelled 'none'
    model = _fit(task, pretrain="none")
    assert model.training_params_["pretrain"] == "none"
    bn = model.network_.backbone.layers[1]  # untouched: no step 0
    assert torch.equal(bn.running_mean, torch.zeros_like(bn.running_mean)) and int(bn.num_batches_tracked) == 0


def test_batchnorm_calibration_skips_a_last_batch_of_one_row():
    """129 training rows in batches of 128 left a last batch of one row, which BatchNorm refuses in
    training mode ("Expected more than 1 value per channel"): a fit of that size failed."""
    import numpy as np

    from dlmsvdd import DLMSVDD

    X = np.random.default_rng(0).normal(size=(162, 4)).astype(np.float32)  # 129 train + 33 validation rows
    model = DLMSVDD(epochs=1, verbose=0, seed=0).fit(X)
    assert model.n_train_ == 129 and np.isfinite(model.dissimilarity(X)).all()


def test_budget_rows_cuts_the_recipes_epochs_on_large_training_sets():
    """Issue 50: from scratch on images, epochs = min(30, ceil(budget_rows / training rows)); epochs given,
    or a budget of 0, train the epochs asked for; the paper's recipe and the MLP have no budget."""
    assert [epochs_for(30, 90_000, n) for n in (150, 3000, 3001, 5280, 8400, 100_000, 10 ** 7)] == [
        30, 30, 30, 18, 11, 1, 1]
    assert epochs_for(30, 0, 10 ** 6) == 30 and epochs_for(7, 90_000, 100) == 7
    scratch = TrainConfig()
    assert BUDGET_ROWS == 35_000 and ONE_BRANCH_WORK == 6
    # past the budget the small CNN trains one branch, whose rows count a sixth: Fashion-MNIST at ratio 0.1
    # (5,280 rows) and 0.5 (7,200), CIFAR-10 at 0.1 (4,400): one branch, 30 epochs; Fashion-MNIST at 0.75
    # (8,400): one branch, 25 epochs; digits (at most 1,000 rows; 30 epochs of four branches fit the budget
    # up to 1,206): the four branches, 30 epochs; ImageNet-LT's 115,846 rows: one branch, 2 epochs
    shapes = [(p["cnn_branches"], p["epochs"]) for p in (scratch.training_params(False, n_train=n)
                                                          for n in (5280, 7200, 8400, 4400, 1000, 1206, 1207,
                                                                    20_000, 115_846))]
    assert shapes == [(1, 30), (1, 30), (1, 25), (1, 30), (4, 30), (4, 30), (1, 30), (1, 11), (1, 2)]
    assert scratch.training_params(False)["epochs"] == 30 and scratch.training_params(False)["cnn_branches"] == 4
    assert TrainConfig(epochs=30).training_params(False, n_train=8400)["cnn_branches"] == 4  # epochs given: no cut
    assert TrainConfig(budget_rows=0).training_params(False, n_train=5280)["epochs"] == 30
    # branches given: the budget cuts the epochs alone
    assert TrainConfig(cnn_branches=4).training_params(False, n_train=8400)["epochs"] == 5
    assert TrainConfig(budget_rows=10_560).training_params(False, n_train=5280)["epochs"] == 12
    assert TrainConfig(budget_rows=10_560, cnn_branches=2).training_params(False, n_train=5280)["epochs"] == 2
    assert TrainConfig(weights="imagenet").training_params(False, n_train=10 ** 6)["epochs"] == 30
    assert TrainConfig().training_params(True, n_train=10 ** 6)["epochs"] == 15
    task = tasks.make_task(datasets.digits(), 1, ratio=0.5, seed=0)
    model = DLMSVDD(verbose=0, budget_rows=2 * len(task.train) + 1, cnn_branches=4).fit(task.train, task.val)
    assert model.training_params_["epochs"] == 3 and [row["epoch"] for row in model.history_] == [0, 1, 2, 3]


def test_past_the_budget_the_fit_trains_one_branch_and_its_file_rebuilds_it(tmp_path):
    """The network the budget chose (one branch, its epochs) is the fit's, and a saved model records it:
    loaded (and saved again), it rebuilds that network, not the configuration's four branches."""
    from dlmsvdd import DLMSVDD

    task = tasks.make_task(datasets.digits(), 1, ratio=0.5, seed=0)
    n = len(task.train)
    model = DLMSVDD(verbose=0, budget_rows=n // 3).fit(task.train, task.val)  # 30 epochs of 4 branches: past it
    assert (model.training_params_["cnn_branches"], model.training_params_["epochs"]) == (1, 2)
    assert model.network_.backbone.branches == 1 and len(model.history_) == 3
    model.save(tmp_path / "model.pt")
    loaded = DLMSVDD.load(tmp_path / "model.pt")
    assert loaded.network_.backbone.branches == 1 and loaded.config.cnn_branches is None
    np.testing.assert_array_equal(loaded.dissimilarity(task.test), model.dissimilarity(task.test))
    loaded.save(tmp_path / "again.pt")
    np.testing.assert_array_equal(DLMSVDD.load(tmp_path / "again.pt").dissimilarity(task.test),
                                  model.dissimilarity(task.test))


def test_the_budget_is_the_cpus_a_gpu_trains_the_recipes_epochs():
    """The recipe's budget comes from the CPU's clock: a fit on a GPU trains the recipe's 30 epochs
    (on one H200 the whole Fashion-MNIST table in 254 s, 0.0035-0.0079 above the budget's AUROC); a
    budget given is kept on any device."""
    scratch = TrainConfig()
    assert [tuple(scratch.training_params(False, n_train=8400, device=d)[k] for k in ("cnn_branches", "epochs"))
            for d in ("cpu", "cuda", "cuda:1")] == [(1, 25), (4, 30), (4, 30)]
    assert scratch.training_params(False, device=torch.device("cuda"))["budget_rows"] == 0
    assert scratch.training_params(False, device="cpu")["budget_rows"] == BUDGET_ROWS
    assert TrainConfig(budget_rows=BUDGET_ROWS).training_params(False, n_train=8400, device="cuda")["cnn_branches"] == 1


def test_a_resumed_run_keeps_the_epochs_it_started_with(tmp_path):
    """A checkpoint records the run's epochs (after the budget, which depends on the device): a run
    resumed elsewhere trains those, not the ones this device's budget would give."""
    from dlmsvdd import DLMSVDD
    from dlmsvdd.training import checkpoints

    task = tasks.make_task(datasets.digits(), 1, ratio=0.5, seed=0)
    path = tmp_path / "state.pt"
    params = dict(verbose=0, epochs=None, budget_rows=2 * len(task.train) + 1, cnn_branches=4)  # 3 epochs here

    def stop(row):
        if row["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, callback=stop)
    state = checkpoints.read(path, checkpoints.TRAINING)
    assert state["epochs"] == 3
    state["epochs"] = 4  # as if the run had started where its budget gave 4
    del state["resolved"]["lr_schedule"]  # and before the schedule existed (it trained at a constant rate)
    assert state.pop("network_shape") == {"cnn_width": 32, "cnn_branches": 4,  # and before the run recorded it
                                          "cnn_branch_norm": True}
    del state["config"]["cnn_branch_norm"]  # and before the field existed (each branch normalised apart)
    state["resolved"].pop("cnn_branch_norm", None)
    checkpoints.write(path, {k: v for k, v in state.items() if k not in ("format", "kind")}, checkpoints.TRAINING)
    resumed = DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, resume=True)
    assert resumed.training_params_["epochs"] == 4 and [row["epoch"] for row in resumed.history_] == [0, 1, 2, 3, 4]
    # a state written before nu="auto" took the recipe's value with labels trained at 1.2: not resumed at 5
    state = checkpoints.read(path, checkpoints.TRAINING)
    del state["resolved"]["labelled_nu"]
    checkpoints.write(path, {k: v for k, v in state.items() if k not in ("format", "kind")}, checkpoints.TRAINING)
    with pytest.raises(ValueError, match="labelled_nu: 1.2 there, 5.0 here"):
        DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, resume=True)
    # and before slack_scale="auto" did (it trained at the paper's penalties): not resumed at 10 times them
    state["resolved"]["labelled_nu"] = 5.0
    del state["resolved"]["labelled_slack_scale"]
    checkpoints.write(path, {k: v for k, v in state.items() if k not in ("format", "kind")}, checkpoints.TRAINING)
    with pytest.raises(ValueError, match="labelled_slack_scale: 1.0 there, 10.0 here"):
        DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, resume=True)
    # and before softplus_scale="auto" did (it trained at the paper's softplus): not resumed at 4
    state["resolved"]["labelled_slack_scale"] = 10.0
    del state["resolved"]["labelled_softplus_scale"]
    checkpoints.write(path, {k: v for k, v in state.items() if k not in ("format", "kind")}, checkpoints.TRAINING)
    with pytest.raises(ValueError, match="labelled_softplus_scale: 1.0 there, 4.0 here"):
        DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, resume=True)
    # and before a labelled fit took the recipe's labelled_lr (it trained at lr): not resumed at 2e-3
    state["resolved"]["labelled_softplus_scale"] = 4.0
    del state["resolved"]["labelled_lr"]
    checkpoints.write(path, {k: v for k, v in state.items() if k not in ("format", "kind")}, checkpoints.TRAINING)
    with pytest.raises(ValueError, match="labelled_lr: 0.001 there, 0.002 here"):
        DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, resume=True)
    # and before its epochs were judged on the weights' moving average: not resumed with one
    state["resolved"]["labelled_lr"] = 2e-3
    del state["resolved"]["labelled_ema_half_life"]
    checkpoints.write(path, {k: v for k, v in state.items() if k not in ("format", "kind")}, checkpoints.TRAINING)
    with pytest.raises(ValueError, match="labelled_ema_half_life: 0.0 there, 1.0 here"):
        DLMSVDD(**params).fit(task.train, task.val, checkpoint=path, resume=True)
