"""The weights' moving average (training.weight_average) against a plain float64 loop."""

import numpy as np
import pytest
import torch
from torch import nn

from dlmsvdd.training.weight_average import WeightAverage


def _network(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))


def _reference(states, half_life, per_epoch):
    """The average by the module's formula, written out in float64 (one dict of arrays per step)."""
    average = {k: v.double().numpy().copy() for k, v in states[0].items()}
    for t, state in enumerate(states[1:], start=1):
        decay = min(0.5 ** (1 / (half_life * per_epoch)), (1 + t) / (10 + t))
        for k, v in state.items():
            v = v.double().numpy()
            average[k] = decay * average[k] + (1 - decay) * v if k != "1.num_batches_tracked" else v
    return average


def _steps(network, count, seed=1):
    """``count`` random changes of every floating weight and buffer (the optimiser's and BatchNorm's
    stand-in) and a BatchNorm forward pass, with the state after each."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(count):
        with torch.no_grad():
            for value in network.state_dict().values():
                if value.is_floating_point():
                    value.add_(0.1 * torch.randn(value.shape, generator=generator))
        network.train()(torch.randn(5, 3, generator=generator))  # counts num_batches_tracked
        yield {k: v.clone() for k, v in network.state_dict().items()}


@pytest.mark.parametrize("half_life, per_epoch", [(1.0, 7), (0.25, 3), (4.0, 50)])
def test_the_average_follows_the_formula(half_life, per_epoch):
    network = _network()
    start = {k: v.clone() for k, v in network.state_dict().items()}
    average = WeightAverage(network, half_life)
    states = [start]
    for state in _steps(network, 40):
        average.update(network, per_epoch)
        states.append(state)
    expected = _reference(states, half_life, per_epoch)
    assert average.steps == 40
    for key, value in average.state.items():
        np.testing.assert_allclose(value.double().numpy(), expected[key], rtol=1e-5, atol=1e-6)
    assert average.state["1.num_batches_tracked"].item() == 40  # an integer buffer: the latest


def test_the_first_steps_move_the_average_and_later_ones_halve_in_the_half_life():
    average = WeightAverage(_network(), half_life=2.0)
    average.steps = 1
    assert average.decay(100) == pytest.approx(2 / 11)
    average.steps = 10_000
    assert average.decay(100) ** 200 == pytest.approx(0.5)


def test_applied_holds_the_average_inside_and_the_network_s_own_weights_after():
    network = _network()
    average = WeightAverage(network, 1.0)
    for _ in _steps(network, 5):
        average.update(network, 5)
    own = {k: v.clone() for k, v in network.state_dict().items()}
    assert not torch.equal(own["0.weight"], average.state["0.weight"])
    with pytest.raises(RuntimeError, match="inside"):
        with average.applied(network):
            for key, value in network.state_dict().items():
                torch.testing.assert_close(value, average.state[key], rtol=0, atol=0)
            raise RuntimeError("inside")
    for key, value in network.state_dict().items():
        torch.testing.assert_close(value, own[key], rtol=0, atol=0)


def test_a_stored_average_goes_on_as_the_one_that_stored_it():
    network = _network()
    average = WeightAverage(network, 1.5)
    steps = _steps(network, 10)
    for _ in range(4):
        next(steps)
        average.update(network, 4)
    restored = WeightAverage.from_state_dict(average.state_dict(), network)
    for _ in steps:
        average.update(network, 4)
        restored.update(network, 4)
    assert restored.steps == average.steps == 10 and restored.half_life == 1.5
    for key, value in average.state.items():
        torch.testing.assert_close(restored.state[key], value, rtol=0, atol=0)


def test_a_half_life_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="half-life is a number of epochs > 0"):
        WeightAverage(_network(), 0)
