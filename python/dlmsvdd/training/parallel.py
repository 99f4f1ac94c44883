"""Training on several processes (devices, machines) with torch.distributed.

Launch the usual command under torchrun, e.g.
``torchrun --nproc-per-node 4 -m dlmsvdd.cli train --data cifar10 ...``:
every process joins the group torchrun describes in its environment (gloo on
CPU, nccl on GPUs; process k uses GPU ``LOCAL_RANK``) and the trainer then

* computes the features of its contiguous shard of each data set (training
  pass, validation and test scores; scores are gathered, O(n) floats);
* solves the alpha-step sharded (``dlmsvdd_ext.distributed``): the kernel is
  never gathered, a Frank-Wolfe iteration moves O(1) and O(d or m) numbers;
* runs the omega-step under DistributedDataParallel, each rank on its part of
  every batch (the global batch size stays ``batch_size``).

Model selection, the refit and the threshold see the same numbers on every
rank; rank 0 alone writes the run folder and the checkpoint, which loads in a
single process.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, Subset

from dlmsvdd_ext.distributed import Shard, shard_bounds

log = logging.getLogger("dlmsvdd")


@dataclass
class Group:
    """This process's place in the process group."""

    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, dataset: Dataset) -> Subset:
        """This rank's contiguous part of a data set (``shard_bounds``)."""
        start, stop = shard_bounds(len(dataset), self.world_size, self.rank)
        return Subset(dataset, range(start, stop))

    def sync_buffers(self, module: torch.nn.Module) -> None:
        """Rank 0's buffers (batch-norm statistics) everywhere: DDP sends them
        before each forward, so after the last step every rank holds its own."""
        self.sync_tensors(module.buffers())

    def sync_tensors(self, tensors) -> None:
        """Rank 0's values of ``tensors`` everywhere, in place (a moving average of
        the weights averages each rank's own batch-norm statistics)."""
        for tensor in tensors:
            dist.broadcast(tensor, 0)

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks, in place, on every rank."""
        dist.all_reduce(tensor)
        return tensor

    def gather(self, local: torch.Tensor, n: int) -> torch.Tensor:
        """The n rows of a set from every rank's shard, on every rank."""
        return Shard(n).gather(local)


def any_true(value: bool, group: Group | None, device: torch.device | str = "cpu") -> bool:
    """Whether ``value`` holds on any rank (``value`` itself when alone)."""
    if group is None:
        return value
    flag = torch.tensor([float(value)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def process_device(device: torch.device, auto: bool, local_processes: int, gpus: int) -> torch.device:
    """The device of one of ``local_processes`` processes on this machine, which has ``gpus`` GPUs.

    Each process takes its own GPU (NCCL refuses two ranks on one). With fewer GPUs than
    processes, ``device="auto"`` trains on the CPU (gloo) and says so; a GPU asked for by
    name stops here, before any training, with what to run instead.
    """
    if device.type != "cuda" or device.index is not None or local_processes <= gpus:
        return device
    if auto:
        log.warning("%d processes on this machine and %d GPU(s): training on the CPU (gloo); run torchrun "
                    "--nproc-per-node %d to train on the GPU(s)", local_processes, gpus, gpus)
        return torch.device("cpu")
    raise ValueError(f"torchrun started {local_processes} processes on this machine, which has {gpus} GPU(s), and "
                     f"each process needs a GPU of its own (NCCL): run torchrun --nproc-per-node {gpus}, or "
                     "--device cpu to train the processes on the CPU (gloo)")


def join(device: torch.device, auto: bool = False) -> tuple[Group | None, torch.device]:
    """The process group this process belongs to (joined here when torchrun's
    environment names one and nobody has yet), and the device it should use
    (``process_device``; ``auto``: the device was "auto"). None when running alone."""
    if not dist.is_available():
        return None, device
    if not dist.is_initialized():
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return None, device
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        device = process_device(device, auto, local, torch.cuda.device_count() if device.type == "cuda" else 0)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        log.info("joined the process group: rank %d of %d (%s)", dist.get_rank(), dist.get_world_size(),
                 dist.get_backend())
    if dist.get_world_size() == 1:
        return None, device
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    return Group(dist.get_rank(), dist.get_world_size(), local_rank), device


def leave() -> None:
    """Ends the process group, if any (at the end of a command)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
