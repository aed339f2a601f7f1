"""--average: averaged copies of the trained weights, kept beside the training (torch.optim.swa_utils).

`Averages` follows the model's trainable parameters (the same tensors, `_Trainable`) with one
`AveragedModel` per copy asked for: EMA (`get_ema_multi_avg_fn`) and SWA (the equal average, over the steps past
--swa-start of the planned ones). `update` runs after every applied optimizer step and only reads the weights:
no RNG draw, no learning-rate change (no SWALR), so the trained trajectory is the one a run without averages takes.
A copy is evaluated by putting its weights into the model for the while (`loaded`) and the trained ones back, bit
for bit: every reader of the model (the evaluation, the callbacks' best.pt) sees the copy's weights without
knowing of it, and the fast path's cast evaluation weights are made again, since the in-place copy bumps the
tensors' version counters that its cache is stamped with. Frozen weights do not move, so they are not copied.
"""
from contextlib import contextmanager
from typing import Optional

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, get_swa_multi_avg_fn


class _Trainable(nn.Module):
    """The model's trainable parameters, the very tensors, in the model's order: what the averages follow."""

    def __init__(self, model: nn.Module):
        super().__init__()
        for name, p in model.named_parameters():
            if p.requires_grad:
                self.register_parameter(name.replace(".", "/"), p)  # a parameter's name holds no dot


class Averages:
    """The averaged copies of a run (`kinds` of tasks.config.AVERAGE_KINDS, the run's model first; "none", the
    trained weights, holds no copy). SWA averages the weights after each step past `swa_start_step`."""

    def __init__(self, model: nn.Module, kinds: tuple, ema_decay: float, swa_start_step: int):
        self.kinds, self.ema_decay, self.swa_start_step = kinds, ema_decay, swa_start_step
        self.trainable = _Trainable(model)
        self.copies = {}
        for kind in kinds:
            if kind == "none":
                continue
            average = AveragedModel(self.trainable, multi_avg_fn=get_ema_multi_avg_fn(ema_decay)
                                    if kind == "ema" else get_swa_multi_avg_fn())
            average.requires_grad_(False)
            self.copies[kind] = average  # its step counter stays on the CPU: no device read to test it

    @property
    def model_kind(self) -> str:
        """The copy that is the run's model."""
        return self.kinds[0]

    def update(self, step: int) -> None:
        """After optimizer step `step` (counted from 1), applied: EMA takes every step, SWA those past its start."""
        for kind, average in self.copies.items():
            if kind == "ema" or step > self.swa_start_step:
                _update(average, self.trainable)

    def averaged_steps(self, kind: str) -> int:
        return int(self.copies[kind].n_averaged)

    @contextmanager
    def loaded(self, kind: str):
        """The model holds copy `kind`'s weights inside the block, the trained ones again after it, bit for bit.
        A copy that has averaged nothing yet (SWA before its start) is the trained weights."""
        if kind == "none" or self.averaged_steps(kind) == 0:
            yield
            return
        params = list(self.trainable.parameters())
        with torch.no_grad():
            kept = [p.detach().clone() for p in params]
            _copy(params, self.copies[kind].module.parameters())
        try:
            yield
        finally:
            with torch.no_grad():
                _copy(params, kept)

    def put_in(self, kind: str) -> None:
        """The model keeps copy `kind`'s weights (the run is finished: the trained ones are no longer needed)."""
        if kind != "none" and self.averaged_steps(kind) > 0:
            with torch.no_grad():
                _copy(list(self.trainable.parameters()), self.copies[kind].module.parameters())

    def state_dict(self) -> dict:
        return {kind: average.state_dict() for kind, average in self.copies.items()}

    def load_state_dict(self, saved: dict) -> None:
        if set(saved) != set(self.copies):
            raise KeyError(f"the checkpoint's averages are {sorted(saved)}, the run's {sorted(self.copies)}")
        for kind, average in self.copies.items():
            average.load_state_dict(saved[kind])


def _update(average: AveragedModel, trainable: nn.Module) -> None:
    """`average.update_parameters(trainable)` without its host sync: torch's copies the CPU step counter to
    the device every step (`n_averaged.to(device)`, a blocking copy on CUDA, one host sync a step), though
    both of its averaging functions take a number. tests/tasks/training/test_averaging.py holds the two to
    each other."""
    mine = [p.detach() for p in average.module.parameters()]
    theirs = [p.detach() for p in trainable.parameters()]
    with torch.no_grad():
        if int(average.n_averaged) == 0:
            torch._foreach_copy_(mine, theirs)
        else:
            average.multi_avg_fn(mine, theirs, int(average.n_averaged))
    average.n_averaged += 1


def copy_record(averages: Averages, kind: str, metrics: dict) -> dict:
    """An evaluation's record of one copy (history's "copies"): its dev metrics and, for an average, how many
    steps' weights it holds."""
    return {"dev": metrics} if kind == "none" else {"dev": metrics, "averaged_steps": averages.averaged_steps(kind)}


def averages_summary(averages: Averages, history: list, score: str) -> dict:
    """metrics.json's "averages": which copy is the run's model, the averages' settings, and each copy's best
    evaluation (the run's rule: the first with the highest `score`) and final one, over the same evaluations."""
    summary = {"model": averages.model_kind}
    if "ema" in averages.kinds:
        summary["ema_decay"] = averages.ema_decay
    if "swa" in averages.kinds:
        summary["swa_start_step"] = averages.swa_start_step
    copies = {}
    for kind in averages.kinds:
        best = None
        for entry in history:
            dev = entry["copies"][kind]["dev"]
            if best is None or (dev[score] or 0) > (best["dev"][score] or 0):
                best = {"epoch": entry["epoch"], "step": entry["step"], "dev": dev}
        copies[kind] = {"best": best, "final": history[-1]["copies"][kind]["dev"]}
    summary["copies"] = copies
    return summary


def _copy(targets: list, sources) -> None:
    for target, source in zip(targets, sources, strict=True):
        target.copy_(source)


# What share of the first step's weights an EMA run's model may keep at the end before the run says so.
EARLY_SHARE_WARNING = 0.01


def early_weights_warning(kinds: tuple, ema_decay: float, total_steps: int) -> Optional[str]:
    """A line for a run whose model is the EMA copy and too short for its decay: after n updates the first
    step's weights keep a share d^(n-1) of the average (the first update copies them), 37% after 200 steps at
    0.995. None where the share left is under EARLY_SHARE_WARNING, or the run's model is no EMA."""
    share = ema_decay ** max(total_steps - 1, 0)
    if kinds[0] != "ema" or total_steps <= 1 or share < EARLY_SHARE_WARNING:
        return None
    return (f"the run's model is the EMA copy (--average {','.join(kinds)}) at --ema-decay {ema_decay}, and "
            f"{total_steps} planned steps leave {share:.0%} of the first step's weights in it: for a run "
            f"this short pass --average none or a smaller --ema-decay (docs/training.md, weight averaging)")


def build_averages(model: nn.Module, kinds: tuple, ema_decay: float, swa_start: float,
                   total_steps: int) -> Optional[Averages]:
    """The run's averages, None when it keeps none (--average none)."""
    if kinds == ("none",):
        return None
    return Averages(model, kinds, ema_decay, round(swa_start * total_steps))
