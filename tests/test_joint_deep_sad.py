"""Deep SAD's loss beside the margin loss in the joint epochs (``deep_sad_weight``,
``dlmsvdd.training.deep_sad.anchor`` / ``anchored_loss``): the reference it is fixed to, the loss
against a float64 reference, how the trainer adds it, and what it does to the features."""

import threading

import numpy as np
import pytest
import torch

from dlmsvdd import datasets, tasks
from dlmsvdd.training import deep_sad
from dlmsvdd.training import trainer as trainer_module
from dlmsvdd.training.config import SCRATCH_IMAGES_DEEP_SAD_WEIGHT, TrainConfig
from dlmsvdd.training.trainer import DLMSVDD


@pytest.fixture(scope="module")
def task():
    return tasks.make_task(datasets.digits(), normal_class=3, ratio=0.1, seed=0)


def _anchor_reference(z: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, float]:
    """In float64: the normals' mean and the root mean squared distance of the normals to it."""
    c = z[t > 0].mean(0)
    return c, float(np.sqrt(((z[t > 0] - c) ** 2).sum(1).mean()))


def test_the_anchor_is_the_normals_mean_unpushed_and_their_rms_distance_to_it():
    """The joint term's centre is the normals' mean itself; Deep SAD's own centre (its peer's and
    step 0's) pushes a coordinate within 0.1 of 0 out to 0.1."""
    rng = np.random.default_rng(1)
    z = rng.normal(size=(40, 6))
    z[:, 0] = 0.03 + 0.001 * rng.normal(size=40)  # a coordinate whose mean lies within 0.1 of 0
    t = np.where(rng.random(40) < 0.8, 1, -1)
    c, s = _anchor_reference(z, t)
    anchor = deep_sad.anchor(torch.as_tensor(z), t)
    np.testing.assert_allclose(anchor.centre.double().numpy(), c, rtol=1e-6, atol=1e-7)
    assert anchor.centre[0] == pytest.approx(0.03, abs=0.001) and anchor.scale == pytest.approx(s, rel=1e-6)
    pushed = deep_sad.centre(torch.as_tensor(z), t)
    np.testing.assert_allclose(pushed.numpy(), np.where(np.abs(c) < 0.1, np.where(c < 0, -0.1, 0.1), c), rtol=1e-6)
    assert float(pushed[0]) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="needs normal training rows"):
        deep_sad.anchor(torch.as_tensor(z), -np.ones(40))


def test_the_anchored_loss_is_deep_sads_loss_in_units_of_the_anchors_scale():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(30, 5))
    t = np.array([1] * 24 + [-1] * 6)
    anchor = deep_sad.Anchor(torch.as_tensor(rng.normal(size=5)), 2.5)
    d = ((z - anchor.centre.numpy()) ** 2).sum(1) / 2.5 ** 2
    expected = np.where(t > 0, d, 1.0 / (d + 1e-6)).mean()
    got = deep_sad.anchored_loss(torch.as_tensor(z), torch.as_tensor(t), anchor)
    assert float(got) == pytest.approx(expected, rel=1e-12)
    # scale-free: the features and the anchor scaled alike leave it as it was
    scaled = deep_sad.Anchor(anchor.centre * 7.0, 2.5 * 7.0)
    assert float(deep_sad.anchored_loss(torch.as_tensor(z) * 7.0, torch.as_tensor(t), scaled)) == \
        pytest.approx(expected, rel=1e-10)


class _ThreadRank:
    """One of two ranks run as threads: ``sum_`` is all_reduce's sum over both ranks' tensors."""

    def __init__(self, rank: int, slots: list, barrier: threading.Barrier):
        self.rank, self.slots, self.barrier = rank, slots, barrier

    def sum_(self, tensor):
        self.slots[self.rank] = tensor.clone()
        self.barrier.wait()
        total = self.slots[0] + self.slots[1]
        self.barrier.wait()  # both have read the other's before either writes again
        tensor.copy_(total)
        return tensor


def test_the_anchor_over_two_ranks_is_the_anchor_of_all_their_rows():
    rng = np.random.default_rng(3)
    z = torch.as_tensor(rng.normal(size=(50, 4)), dtype=torch.float32)
    t = np.where(rng.random(50) < 0.7, 1, -1)
    slots, barrier, anchors = [None, None], threading.Barrier(2, timeout=30), [None, None]
    shards = [(z[:30], t[:30]), (z[30:], t[30:])]

    def rank(r):
        anchors[r] = deep_sad.anchor(*shards[r], _ThreadRank(r, slots, barrier))

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    whole = deep_sad.anchor(z, t)
    for anchor in anchors:
        torch.testing.assert_close(anchor.centre, whole.centre, rtol=1e-6, atol=1e-6)
        assert anchor.scale == pytest.approx(whole.scale, rel=1e-6)


def _config(**kw):
    return TrainConfig(**{"backbone": "small_cnn", "weights": None, "verbose": 0, "batch_size": 64, **kw})


def test_the_omega_step_adds_deep_sads_loss_at_its_weight_around_the_starting_features(task, monkeypatch):
    """Each batch's loss is the margin loss plus deep_sad_weight times the anchored loss of the same
    features; the anchor is that of the training features of the network the epochs start from."""
    margins, terms, anchors = [], [], []

    def margin_spy(*args):
        margins.append(float(real_margin(*args)))
        return real_margin(*args)

    def term_spy(z, t, anchor):
        anchors.append(anchor)
        terms.append(float(real_term(z, t, anchor)))
        return real_term(z, t, anchor)

    real_margin, real_term = trainer_module.margin_violation_loss, deep_sad.anchored_loss
    monkeypatch.setattr(trainer_module, "margin_violation_loss", margin_spy)
    monkeypatch.setattr(deep_sad, "anchored_loss", term_spy)
    model = DLMSVDD(_config(epochs=2, deep_sad_weight=0.5)).fit(task.train, task.val)
    losses = [v for row in model.history_[:-1] for v in row["omega_batch_losses"]]
    assert len(terms) == len(losses) == 2 * (len(task.train) // 64)
    np.testing.assert_allclose(losses, np.add(margins, 0.5 * np.array(terms)), rtol=1e-6)
    assert all(a is anchors[0] for a in anchors)  # one, fixed through the epochs
    start = DLMSVDD(_config(epochs=0)).fit(task.train, task.val)  # the same seed: the network the epochs start from
    feats, targets = start._features(task.train)
    expected = deep_sad.anchor(feats, targets)
    torch.testing.assert_close(anchors[0].centre, expected.centre, rtol=1e-5, atol=1e-6)
    assert anchors[0].scale == pytest.approx(expected.scale, rel=1e-5)


def test_deep_sad_weight_left_to_the_recipe_is_its_labelled_one_with_labels_and_none_without(task, monkeypatch):
    calls = []
    real = deep_sad.anchored_loss
    monkeypatch.setattr(deep_sad, "anchored_loss", lambda *a: calls.append(1) or real(*a))
    model = DLMSVDD(_config(epochs=1)).fit(task.train, task.val)
    assert model.deep_sad_weight_ == SCRATCH_IMAGES_DEEP_SAD_WEIGHT > 0 and len(calls) == len(task.train) // 64
    calls.clear()
    for kw in ({"deep_sad_weight": 0.0}, {"recipe": "paper"}):
        model = DLMSVDD(_config(epochs=1, **kw)).fit(task.train, task.val)
        assert model.deep_sad_weight_ == 0 and calls == []
    normal = np.flatnonzero(task.train.targets > 0)
    one_class = torch.utils.data.Subset(task.train, normal)
    one_class.targets = task.train.targets[normal]
    model = DLMSVDD(_config(epochs=1)).fit(one_class)
    assert model.deep_sad_weight_ == 0 and calls == []  # without labels: not measured, none


def test_the_term_draws_the_normals_in_against_the_anomalies(task):
    """Four epochs of batches of 16 with the term at weight 10 and without, the same seed: the training
    normals end nearer the anchor's centre, in units of the anomalies' distance to it, with the term
    (at weight 1 on these 112 rows the margin loss, which draws the normals in too, moves them about
    as much)."""
    def config(**kw):
        return _config(ema_half_life=0, batch_size=16, **kw)

    anchor = deep_sad.anchor(*DLMSVDD(config(epochs=0)).fit(task.train, None)._features(task.train))

    def spread(weight):
        model = DLMSVDD(config(epochs=4, deep_sad_weight=weight)).fit(task.train, None)
        feats, targets = model._features(task.train)
        d = deep_sad.distance(feats.float(), anchor.centre)
        normal = torch.as_tensor(targets > 0)
        return float(d[normal].mean() / d[~normal].mean())

    assert spread(10.0) < 0.8 * spread(0.0)
