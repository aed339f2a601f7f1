"""Data-parallel training with PyTorch's DistributedDataParallel, launched by torchrun.

    torchrun --nproc_per_node N train_multitask.py ...

One process per device (NCCL on CUDA, gloo on CPU). Every rank builds the same
epoch plan from the same seed; each optimizer step's global batch is split by
stride (`shard`), so every example is seen once per epoch in total and a
length-bucketed batch gives each rank a similar share of tokens. Each rank's
loss is weighted by its share of the global batch (`loss_weight`), so the
gradients DDP averages equal those of one process training on the whole batch.
Evaluation splits the batches across ranks and gathers the predictions, so
the metrics are the single-process ones. Only rank 0 writes files.

Outside torchrun (no WORLD_SIZE, or 1) everything here is a no-op.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from minbert import UserError


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str = ""

    @property
    def active(self) -> bool:
        return self.size > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def describe(self) -> dict:
        return {"world_size": self.size, "backend": self.backend or None}


SINGLE = World()


def launched_world_size() -> int:
    """How many processes torchrun started (1 when not launched by it)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise UserError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number") from None


def init_world(device_name: str) -> World:
    """Join the process group torchrun describes in the environment; returns SINGLE without it."""
    size = launched_world_size()
    if size <= 1:
        return SINGLE
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device_name.startswith("cuda") or (device_name == "auto" and torch.cuda.is_available())
    backend = "nccl" if cuda else "gloo"
    if cuda:
        visible = torch.cuda.device_count()
        if local_rank >= visible:
            raise UserError(f"torchrun started process {local_rank} on this machine but {visible} GPU(s) are "
                            f"visible: use --nproc_per_node {visible}, or --device cpu")
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=timedelta(minutes=30))
    return World(rank, size, local_rank, backend)


def device_for(world: World, device: torch.device) -> torch.device:
    """Each rank drives its own GPU: cuda:LOCAL_RANK (a single-process run keeps its --device)."""
    if world.active and device.type == "cuda":
        return torch.device("cuda", world.local_rank)
    return device


def shutdown(world: World) -> None:
    if world.active and dist.is_initialized():
        dist.destroy_process_group()


# ---------------------------------------------------------------------------- training


def shard(indices: list, world: World) -> list:
    """This rank's examples of a global batch: every size-th one, starting at its rank."""
    return list(indices[world.rank::world.size])


def loss_weight(n_local: int, n_global: int, world: World) -> float:
    """Scale of a rank's mean loss so that DDP's average over ranks is the global batch's mean."""
    return n_local * world.size / n_global


def local_batch_indices(indices: list, world: World) -> tuple[list, float]:
    """(this rank's indices, its loss weight). A rank left without examples (a batch smaller than
    the world) runs the batch's first example with weight 0: every rank must take part in the
    gradient all-reduce, and a zero-weighted loss adds nothing to it."""
    mine = shard(indices, world)
    if not mine:
        return list(indices[:1]), 0.0
    return mine, loss_weight(len(mine), len(indices), world)


def all_reduce_mean_(tensor: torch.Tensor, world: World) -> torch.Tensor:
    """In place: the mean over ranks (the reduction DDP applies to gradients). An empty tensor (gradient
    surgery's encoder gradient when --freeze-until all leaves no encoder parameter to train, made on the CPU)
    is its own mean: NCCL would refuse a CPU tensor, and every rank has the same empty one."""
    if world.active and tensor.numel():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor.div_(world.size)
    return tensor


def rank_seed(seed: int, rank: int, step: int = 0) -> int:
    """The seed of one rank's torch RNG (dropout) at a run's `step`: the same weights on every rank, a different
    dropout stream on each. `step` tells a resume that cannot restore each rank's own saved stream apart
    from the run's start."""
    return int(np.random.SeedSequence([seed, rank] + ([step] if step else [])).generate_state(1)[0])


def agreed_signal(signum, world: World):
    """The signal any rank has received (the largest number), so all ranks stop at the same step."""
    if not world.active:
        return signum
    flag = torch.tensor([signum or 0], dtype=torch.int64, device=_collective_device(world))
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item()) or None


def gather_objects(obj: Any, world: World) -> list:
    """Every rank's `obj`, in rank order (a one-item list in a single process)."""
    if not world.active:
        return [obj]
    out = [None] * world.size
    dist.all_gather_object(out, obj)
    return out


def barrier(world: World) -> None:
    if world.active:
        dist.barrier()


def broadcast_from_main(obj: Any, world: World) -> Any:
    """Rank 0's value of `obj` on every rank (e.g. a run folder named after the clock)."""
    if not world.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _collective_device(world: World) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if world.backend == "nccl" else torch.device("cpu")
