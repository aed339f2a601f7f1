"""`bench gpu`'s compare stage: the trainer's own run with minBERT's encoder against the same run with
transformers'.

Both runs are built by the trainer's `build_run` from the same options and prepared data; only the encoder
differs: minBERT's as the trainer loads it for the device (`tasks.inputs.load_encoder`: the reference on CUDA;
with --fast-path the fast path, and every row names which), and transformers' BertModel (sdpa) behind
`TransformersEncoder`. Both time the default plan's first steps as the loop runs them and the trainer's
evaluation of the first --eval-examples dev rows of each task, rounds alternated and synchronised
(bench/paired.py). Each run's peak memory is its own: from its building through its warm-up and one
evaluation, less what was allocated before it.
"""
import dataclasses

from torch import nn

from bench import paired
from bench.common import transformers_bert
from bench.gpu_report import Compared
from bench.trainer import trainer_steps

TRAINERS_PATH, FAST_PATH = "trainer's path", "fast path (--fast-path; not the trainer's on CUDA)"


class TransformersEncoder(nn.Module):
    """transformers' BertModel where the trainer's run expects minBERT's encoder: the same call and outputs
    (`last_hidden_state`, `pooler_output`), `config` (hidden size, initializer range), `embeddings`,
    `num_layers`, and no derived weights to drop after an optimizer step. Its pooler is taken out when the run
    never asks for it (`pool=False`, as minBERT skips it), so neither side computes what nobody reads."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config

    @property
    def embeddings(self):
        return self.model.embeddings

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None, pool=True):
        pooler = self.model.pooler
        if not pool:
            self.model.pooler = None  # transformers' BertModel skips a missing pooler (add_pooling_layer=False)
        try:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              inputs_embeds=inputs_embeds)
        finally:
            self.model.pooler = pooler

    def watch_optimizer(self, optimizer):
        return None


def sync(device) -> None:
    """Wait for the device's queued work (CUDA); a CPU's work is done when its call returns."""
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_worker(run, steps: list, **phases) -> paired.Local:
    """`run` as a worker in this process: its "train" phase the trainer's `steps[start:start + count]`."""
    return paired.Local({"train": lambda start, count: trainer_steps(run, steps[start:start + count]), **phases},
                        sync=lambda: sync(run.inputs.device))


def compared_encoders(config, device) -> dict:
    """minBERT's encoder as the trainer loads it for `device`, and transformers' from the same checkpoint (both
    still on the CPU; the run moves them)."""
    import minbert
    from tasks.inputs import load_encoder
    theirs = transformers_bert(minbert.resolve(config.model)[0])
    return {"minbert": load_encoder(config, device), "transformers": TransformersEncoder(theirs)}


def dev_slice(inputs, rows: int):
    """The prepared inputs with each task's dev split cut to its first `rows` rows: what evaluation reads."""
    data = {task: {**splits, "dev": splits["dev"].rows(list(range(min(rows, len(splits["dev"])))))}
            for task, splits in inputs.data.items()}
    return dataclasses.replace(inputs, data=data)


class Peak:
    """A run's own peak device memory (MiB): from before it is built, less what was allocated then (the other
    run's weights and optimizer states); None on a CPU."""

    def __init__(self, torch, device):
        self.torch, self.device, self.cuda = torch, device, device.type == "cuda"
        if self.cuda:
            self.before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)

    def mib(self):
        if not self.cuda:
            return None
        return (self.torch.cuda.max_memory_allocated(self.device) - self.before) / 2**20


def warmed_runs(torch, config, inputs, evals, warmup: int) -> tuple:
    """Both runs, fresh from the checkpoint, each through the plan's first `warmup` steps and one evaluation:
    the runs, the plan (the same for both: the same options, seed and data) and each run's peak memory."""
    from tasks.evaluation import evaluate
    from tasks.training import build_run
    runs, peaks, plan = {}, {}, None
    for name, encoder in compared_encoders(config, inputs.device).items():
        peak = Peak(torch, inputs.device)
        run = runs[name] = build_run(config, inputs, encoder=encoder)
        plan = plan or run.sampler.plan(0)
        trainer_steps(run, plan[:warmup])
        evaluate(run.model, evals, config.eval_batch_size)
        sync(inputs.device)
        peaks[name] = peak.mib()
    return runs, plan, peaks


def time_models(torch, args, config, precision: str, inputs, where: dict) -> Compared:
    """Both runs on the same steps and dev rows, rounds alternated; the row of `where` (model, setting)."""
    from tasks.evaluation import evaluate
    config = dataclasses.replace(config, precision=precision)
    inputs = dataclasses.replace(inputs, precision=precision, precision_requested=precision)
    evals = dev_slice(inputs, args.eval_examples)
    runs, plan, peaks = warmed_runs(torch, config, inputs, evals, args.warmup)
    steps = plan[args.warmup:args.warmup + args.steps]
    workers = {name: step_worker(run, steps, eval=lambda start, count, run=run: [
        evaluate(run.model, evals, config.eval_batch_size) for _ in range(count)]) for name, run in runs.items()}
    train = paired.alternate(workers, "train", len(steps), args.rounds)
    evaluated = paired.alternate(workers, "eval", args.rounds, args.rounds)
    examples = sum(len(ix) for step in steps for ix in step.values())
    dev_rows = sum(len(evals.data[t]["dev"]) for t in evals.tasks)
    row = Compared(**where, implementation=runs["minbert"].model.encoder.config.implementation,
                   minbert_path=FAST_PATH if args.fast_path else TRAINERS_PATH,
                   tf32=inputs.tf32 and precision == "fp32", steps_per_round=train.steps[0],
                   **{f"{name}_{key}": value for name in runs for key, value in (
                       ("train_per_s", examples / train.total(name)),
                       ("eval_per_s", dev_rows * args.rounds / evaluated.total(name)),
                       ("ms_per_step", 1000 * train.total(name) / len(steps)), ("peak_mib", peaks[name]))},
                   train_ratio=train.ratio(), eval_ratio=evaluated.ratio())
    del runs, workers
    if inputs.device.type == "cuda":
        torch.cuda.empty_cache()
    return row
