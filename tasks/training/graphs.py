"""Whether a run's training step runs as CUDA graphs (--cuda-graphs), decided here and nowhere else, and what a
graphed step needs: static shapes and the learning rate on the device.

A graph replays a recorded sequence of kernels with one launch, so the host's per-operator cost (issue 48: about
45 ms a step on an H200 that does not depend on depth) goes. It needs a step free of host reads (step.py's is)
and shapes seen before: each batch is padded to the narrowest of a few widths (`WIDTHS`, masked padding), so a
task has a handful of shapes rather than one per batch. Each task's forward and backward are captured by
`torch.compile(mode="reduce-overhead")` (one graph per task, width and batch size); clipping and fused AdamW,
a few launches, run eagerly, the learning rate a device tensor that the schedule fills, so nothing is read back.

`auto` is eager for now on every device: the graphed step has not been timed on a GPU (docs/training.md), and
it becomes the default on CUDA only once a GPU session measures it faster. `on` asks for it, and is refused in
one line where it cannot run: off CUDA, and with the options whose steps are not one fixed computation.
"""
from dataclasses import dataclass
from typing import Optional

import torch

from minbert import UserError

WIDTHS = (16, 32, 64, 128, 256, 512)  # token widths a batch is padded to; capped at the model's positions
GRAPHS_HELP = ("on: run each task's forward and backward as CUDA graphs (torch.compile mode reduce-overhead), "
               "each batch padded to one of a few widths (16, 32, ... 512 tokens, masked), the learning rate on "
               "the device; CUDA only. off: the eager step. auto: the eager step everywhere for now, since the "
               "graphed step has not yet been measured faster on a GPU (docs/training.md)")


@dataclass(frozen=True)
class StepGraphs:
    """How the run's step runs: graphed or eager, the widths its batches are padded to, and why."""
    graphed: bool = False
    widths: Optional[tuple] = None   # ascending token widths; None = each batch padded to its own longest
    why: str = "off"

    def to_dict(self) -> dict:
        return {"used": "on" if self.graphed else "off", "widths": list(self.widths) if self.widths else None,
                "why": self.why}


def resolve_graphs(config, inputs) -> StepGraphs:
    """The one decision: --cuda-graphs `config.cuda_graphs` for the run's `inputs` (RunInputs: its device, its
    processes, its encoder's resolved implementation, its tokenizer's width). Raises UserError for `on` where it
    cannot run."""
    requested, device = config.cuda_graphs, inputs.device
    if requested == "off":
        return StepGraphs(why="off: asked (--cuda-graphs off)")
    if requested == "auto":
        return StepGraphs(why="auto: the eager step, until a GPU measures the graphed one faster")
    if device.type != "cuda":
        raise UserError(f"--cuda-graphs on needs a CUDA GPU (this run's device is {device}); "
                        f"use --cuda-graphs auto or off")
    problem = _graph_problem(config, inputs.world, inputs.encoder.config.implementation)
    if problem is not None:
        raise UserError(f"--cuda-graphs on: {problem}; use --cuda-graphs off")
    return StepGraphs(True, widths_up_to(inputs.tokenizer.max_length), "on: asked (--cuda-graphs on)")


def _graph_problem(config, world, implementation: str) -> Optional[str]:
    """Why this run's step cannot be one fixed computation per shape, or None."""
    problems = [
        (config.smart, "SMART's adversarial ascent is not captured (--smart)"),
        (config.surgery != "none", "gradient surgery reads each task's gradients between backwards (--surgery)"),
        (world.active, "not under torchrun (DDP's buckets are not captured here)"),
        (config.compile, "--compile compiles the encoder already; --cuda-graphs on compiles the whole loss"),
        (implementation == "fast", "the fast path reads its padding on the host every batch "
                                   "(--implementation reference)"),
        (config.optimizer != "torch", "the step needs torch's fused AdamW (--optimizer torch)"),
    ]
    return next((why for bad, why in problems if bad), None)


def widths_up_to(positions: int) -> tuple:
    """`WIDTHS` below the model's `positions`, and `positions` itself: every batch fits one of them."""
    return tuple(w for w in WIDTHS if w < positions) + (positions,)


def device_lr(lr: float, graphs: StepGraphs, device: torch.device):
    """The optimizer's learning rate: a device tensor for a graphed step (the schedule fills it in place, so the
    host never reads it back), else the float."""
    return torch.tensor(lr, dtype=torch.float32, device=device) if graphs.graphed else lr


def settle_lr(optimizer: torch.optim.Optimizer, scheduler, graphs: StepGraphs, device: torch.device) -> None:
    """After a checkpoint is loaded: the learning rates in the kind this run's step uses, whichever kind the
    checkpoint's run used (a graphed run resumed eagerly, or the other way round). Loading replaces the
    optimizer's and the schedule's values with the saved ones, floats or tensors; the values are kept."""
    def kind(value):
        value = float(value)  # once, at a resume: a tensor here is read to the host
        return device_lr(value, graphs, device)
    for group in optimizer.param_groups:
        for key in ("lr", "initial_lr"):
            if key in group:
                group[key] = kind(group[key])
    scheduler.base_lrs = [kind(v) for v in scheduler.base_lrs]
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


def graphed_loss(loss_fn: torch.nn.Module, graphs: StepGraphs):
    """The loss module the step calls: compiled into CUDA graphs when graphed, else `loss_fn` itself."""
    if not graphs.graphed:
        return loss_fn
    import torch._dynamo
    # One compilation per task, width and batch size (a short last batch, --grad-accum's parts): room for eight
    # tasks at four batch sizes each, where dynamo's default stops recompiling one function after 8.
    limit = 8 * len(WIDTHS) * 4
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, limit)
    return torch.compile(loss_fn, mode="reduce-overhead", dynamic=False)
