"""Peak memory of a block of torch work, against hand-counted allocations."""

import pytest
import torch

from dlmsvdd.training import memory


def test_peak_from_events_is_the_running_maximum_in_time_order():
    # (start_ns, bytes): +100 at t=1, +50 at t=2, -100 at t=3, +70 at t=4 (given out of order)
    events = [(4, 70), (1, 100), (3, -100), (2, 50)]
    assert memory.peak_from_events(events) == 150  # 100, 150, 50, 120
    assert memory.peak_from_events([]) == 0
    assert memory.peak_from_events([(1, -10), (2, 5)]) == 0  # below the start: nothing above it


def test_cpu_peak_counts_the_torch_allocations_of_the_block():
    with memory.peak("cpu") as probe:
        a = torch.empty(1000, 1000)  # 4,000,000 bytes
        b = torch.empty(500, 1000)  # + 2,000,000 = 6,000,000, the peak
        del a
        c = torch.empty(250, 1000)  # 3,000,000 now
    assert probe.bytes == 6_000_000
    assert "profiler" in probe.method
    del b, c


@pytest.mark.parametrize("under_a_profiler", [False, True])
def test_a_free_of_memory_allocated_before_the_block_is_not_counted(under_a_profiler):
    # On CPU the peak is that of the block's own allocations. Without a profiler running torch does
    # not know the size of the free (it warns so); a tensor allocated under an earlier profiler (an
    # earlier measured fit in the same process) has a known size, but is not the block's either.
    if under_a_profiler:
        with memory.peak("cpu"):
            earlier = torch.empty(300, 1000)
    else:
        earlier = torch.empty(300, 1000)
    with memory.peak("cpu") as probe:
        del earlier
        d = torch.empty(100, 1000)
    assert probe.bytes == 400_000
    del d


def test_block_events_keep_the_blocks_allocations_and_their_frees():
    records = [(5, 0xA, -300),  # a free of an address allocated before the block: dropped
               (1, 0xB, 100), (2, 0xB, -100), (3, 0xB, 50),  # an address freed and allocated again
               (4, 0xC, 70), (6, 0xB, -50)]
    assert memory.block_events(records) == [(1, 100), (2, -100), (3, 50), (4, 70), (6, -50)]
    assert memory.peak_from_events(memory.block_events(records)) == 120


def test_bad_device_is_refused():
    with pytest.raises(ValueError, match="cpu or cuda"):
        with memory.peak("meta"):
            pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_peak_counts_the_block_above_what_was_allocated():
    kept = torch.empty(1 << 20, device="cuda")
    with memory.peak("cuda") as probe:
        a = torch.empty(1 << 20, dtype=torch.float64, device="cuda")  # 8 MiB
        del a
        b = torch.empty(1 << 19, device="cuda")  # 2 MiB
    assert probe.bytes == 8 << 20
    del kept, b
