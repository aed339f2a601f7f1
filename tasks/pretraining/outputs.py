"""Where a pretraining run's results go, as callbacks of the training loop beside its TensorBoard and console:

    RUN/config.json            the run's record: every option, the model it started from, the corpus's sources
                               with their SHA-256, the masking, the machine (`PretrainFolder`)
    RUN/checkpoint.pt          the loop's checkpoint, as fine-tuning's (--resume)
    RUN/model/                 the final weights (pretraining's result is where it ends, not its best evaluation)
    RUN/model-at-<tokens>/     the weights once <tokens> tokens are trained on, one per --save-at budget (`Ladder`)
    RUN/metrics.json           the loop's result: held-out evaluations, steps, tokens
    RUN/tensorboard/           train/loss/mlm, train/accuracy/mlm, train/lr, train/tokens_per_s, dev/masked_*

Every model folder is a Hugging Face BertForMaskedLM checkpoint with its tokenizer files (minbert.export),
and `pretraining.json`: how many steps and tokens made it.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from minbert.export import save_pretrained

from ..fileio import atomic_write_bytes, atomic_write_json
from ..machine import versions
from ..saved.model_folder import MODEL_DIR, PRETRAINING_JSON
from ..training import Callback, RunFolder, writing
from .job import MLM, step_tokens

INFO_FILE = PRETRAINING_JSON


def ladder_folder(tokens: int) -> str:
    return f"model-at-{tokens}"


class TokenClock:
    """The tokens a run has trained on after its current step, from the plans alone (so a resumed run counts as
    the unbroken one): whole passes over the training sequences, then this epoch's steps so far."""

    def __init__(self):
        self.epoch, self.steps = None, None

    def __call__(self, run) -> int:
        state, corpus_train = run.state, run.train[MLM]
        done = state.epoch * corpus_train.tokens
        if state.step_in_epoch == 0:
            return done
        if self.epoch != state.epoch:
            self.epoch = state.epoch
            self.steps = np.cumsum(step_tokens(run.sampler.plan(state.epoch), corpus_train.lengths, len(corpus_train)))
        return done + int(self.steps[state.step_in_epoch - 1])


def export_mlm(folder: Path, run, tokenizer_folder, info: dict) -> None:
    """The model as a Hugging Face folder, then pretraining.json (last: a folder without it is incomplete)."""
    with writing(folder):
        save_pretrained(run.model, folder, tokenizer_folder, atomic_write_bytes)
        atomic_write_json(folder / INFO_FILE, {"made_by": "minbert-multitask pretrain.py", **info})


class PretrainFolder(RunFolder):
    """The run folder: config.json (`record`), checkpoints (RunFolder's), and once finished the final model and
    metrics.json. No best.pt: the final weights are the result."""

    def __init__(self, record: dict, tokenizer_folder, command_options=None):
        super().__init__(command_options)
        self.job_record, self.tokenizer_folder = record, tokenizer_folder
        self.tokens = TokenClock()

    def record(self, run) -> dict:
        inputs, config = run.inputs, run.config
        return {"command": sys.argv, "arguments": self.command_options, "seed": config.seed, **self.job_record,
                "loop": config.to_dict(), "device": str(inputs.device), "versions": versions(),
                "precision": {"requested": inputs.precision_requested, "used": inputs.precision},
                "implementation": {"requested": config.implementation, "used": run.model.config.implementation},
                "steps_per_epoch": run.steps_per_epoch, "total_steps": run.total_steps, **inputs.world.describe(),
                "trainable_parameters": sum(p.numel() for p in run.model.parameters() if p.requires_grad)}

    def on_best(self, run):
        pass

    def on_finish(self, run, result):
        if not self.writes:
            return
        tokens = self.tokens(run)
        export_mlm(run.folder / MODEL_DIR, run, self.tokenizer_folder,
                   {"step": run.state.global_step, "tokens": tokens, "held_out": result["final"],
                    "lineage": self.job_record["lineage"]})
        with writing(run.folder / "metrics.json"):
            atomic_write_json(run.folder / "metrics.json", {**result, "tokens": tokens})


class Ladder(Callback):
    """--save-at: a model folder the first step the run's tokens reach each budget."""

    def __init__(self, budgets, tokenizer_folder, lineage: dict):
        self.budgets, self.tokenizer_folder, self.lineage = sorted(budgets), tokenizer_folder, lineage
        self.tokens = TokenClock()

    def on_begin(self, run, resumed):
        # the tokens before the next step, from the plans alone: every process counts the same, so all of them
        # evaluate a rung together
        self.before = self.tokens(run) if self.budgets else 0
        # rung 0: the drawn (or loaded) weights before any step; a resumed run wrote it when it began
        if not resumed and 0 in self.budgets:
            self.save(run, 0, 0)

    def on_step(self, run, info):
        if not self.budgets:
            return
        before, now = self.before, self.tokens(run)
        self.before = now
        for budget in self.budgets:
            if before < budget <= now:
                self.save(run, budget, now)

    def save(self, run, budget: int, tokens: int) -> None:
        """The rung's folder, with its held-out masked-token loss and accuracy (the same masks as every
        evaluation of the run); every process evaluates its share, the main one writes."""
        held_out, _ = run.job.evaluate(run, False)
        run.model.train()  # a rung falls inside an epoch, whose steps train with dropout
        if run.inputs.world.main:
            export_mlm(run.folder / ladder_folder(budget), run, self.tokenizer_folder,
                       {"step": run.state.global_step, "tokens": tokens, "budget": budget, "held_out": held_out,
                        "lineage": self.lineage})


class TokenRate(Callback):
    """train/tokens_per_s on the curves, each step's tokens over its seconds; the run's rate said at its end."""

    def __init__(self):
        self.last = None
        self.tokens = self.seconds = 0.0

    def on_plan(self, run, plan):
        self.last = time.perf_counter()  # evaluations and checkpoints between epochs are not training time

    def on_step(self, run, info):
        now = time.perf_counter()
        tokens = int(step_tokens([info.batch], run.train[MLM].lengths, len(run.train[MLM]))[0])
        seconds, self.last = now - self.last, now
        self.tokens, self.seconds = self.tokens + tokens, self.seconds + seconds
        if seconds > 0:
            run.log("train/tokens_per_s", tokens / seconds)

    def on_finish(self, run, result):
        if run.inputs.world.main and self.seconds > 0:
            print(f"trained on {self.tokens:,.0f} tokens in this process's {self.seconds / 60:.1f} min of steps: "
                  f"{self.tokens / self.seconds:,.0f} tokens/s", flush=True)
