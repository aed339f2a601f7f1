"""`bench.gpu`'s comparison: the trainer's own run with minBERT's encoder against the same run with transformers'.

Both sides are the run `train_multitask.py` builds (`tasks.training.build_run`: the task heads on the encoder,
mean pooling, the loss, fused AdamW with its weight-decay groups, the schedule, the fp16 scaler), from the same
options (`parse_train_command`: the default run, the model, the device, the precision) and the same prepared
data (`tasks.inputs.prepare`). Only the encoder differs:

- minBERT as the trainer loads it (`tasks.inputs.load_encoder`: `--implementation auto` resolved for the device,
  the reference `minbert/model.py` on CUDA); with `--fast-path`, the fast path (`--implementation fast`), which
  is not what the trainer runs on CUDA: every row says which one ran;
- `transformers.BertModel(attn_implementation="sdpa")` from the same checkpoint, behind `TransformersEncoder`
  (what the run asks of an encoder), so its heads, loss, optimizer and steps are the trainer's too.

Training: the first steps of the default run's epoch-0 plan (the proportional sampler's SST, Quora and STS
batches, length-bucketed), each a whole `tasks.training.train_step` (forward, loss, backward, clipping,
AdamW), the next step's batches built ahead as the loop does on CUDA, and the schedule's step. Evaluation: the
trainer's (`tasks.evaluation.evaluate`) on the first --eval-examples rows of each task's dev split. The two runs
alternate round by round (A B, B A, ...) over the same steps; every round ends with `torch.cuda.synchronize()`;
ratios are the median of the per-round ratios (above 1: minBERT faster). Peak memory is the run's own:
`torch.cuda.max_memory_allocated` from its building through its warm-up steps and one evaluation, less what
was allocated before it was built (the other run's weights and optimizer states). fp32 runs in TF32 where the
trainer would (bench.gpu's --no-tf32 turns it off), said in the row.
"""
import dataclasses
import statistics
import time

from torch import nn

from bench.step_profile import trainer_steps

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


def compare_options(args, folder: str, precision: str) -> list:
    """train_multitask.py's options for the default run on `folder`, as bench gpu's flags set them."""
    return ["--model", folder, "--device", args.device, "--precision", precision, "--seed", str(args.seed),
            "--tasks", args.tasks, "--batch-size", str(args.batch_size), "--eval-batch-size", str(args.eval_batch_size),
            *(["--implementation", "fast"] if args.fast_path else []), *(["--no-tf32"] if args.no_tf32 else [])]


def sync(device) -> None:
    """Wait for the device's queued work (CUDA); a CPU's work is done when its call returns."""
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compared_encoders(config, device) -> dict:
    """minBERT's encoder as the trainer loads it for `device`, and transformers' from the same checkpoint (both
    still on the CPU; the run moves them)."""
    import transformers

    import minbert
    from tasks.inputs import load_encoder
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    folder = str(minbert.resolve(config.model)[0])
    theirs = transformers.BertModel.from_pretrained(folder, attn_implementation="sdpa")
    return {"minbert": load_encoder(config, device), "transformers": TransformersEncoder(theirs)}


def dev_slice(inputs, rows: int):
    """The prepared inputs with each task's dev split cut to its first `rows` rows: what evaluation reads."""
    data = {task: {**splits, "dev": splits["dev"].rows(list(range(min(rows, len(splits["dev"])))))}
            for task, splits in inputs.data.items()}
    return dataclasses.replace(inputs, data=data)


def time_models(torch, args, config, precision: str, inputs) -> dict:
    """Both runs, fresh from the checkpoint, on the same steps and dev rows; rounds alternate A B, B A, ..."""
    from tasks.evaluation import evaluate
    from tasks.training import build_run
    config = dataclasses.replace(config, precision=precision)
    inputs = dataclasses.replace(inputs, precision=precision, precision_requested=precision)
    device = inputs.device
    cuda = device.type == "cuda"
    evals = dev_slice(inputs, args.eval_examples)
    runs, peaks, warmup, timed = {}, {}, [], []
    for name, encoder in compared_encoders(config, device).items():
        before = torch.cuda.memory_allocated(device) if cuda else 0  # the other run's weights and states
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        run = runs[name] = build_run(config, inputs, encoder=encoder)
        if not warmup:
            plan = run.sampler.plan(0)  # the same for both runs: the same options, seed and data
            warmup, timed = plan[:args.warmup], plan[args.warmup:args.warmup + args.steps]
        trainer_steps(run, warmup)
        evaluate(run.model, evals, config.eval_batch_size)
        sync(device)
        peaks[name] = (torch.cuda.max_memory_allocated(device) - before) / 2**20 if cuda else float("nan")
    per_round = max(1, len(timed) // args.rounds)
    rounds = [timed[r * per_round:(r + 1) * per_round] for r in range(args.rounds)]
    seconds = {(name, phase): [] for name in runs for phase in ("train", "eval")}
    for r, steps in enumerate(rounds):
        for name in (list(runs) if r % 2 == 0 else list(reversed(runs))):
            run = runs[name]
            for phase in ("train", "eval"):
                sync(device)
                start = time.perf_counter()
                if phase == "train":
                    trainer_steps(run, steps)
                else:
                    evaluate(run.model, evals, config.eval_batch_size)
                sync(device)
                seconds[name, phase].append(time.perf_counter() - start)
    examples = {"train": sum(len(ix) for steps in rounds for step in steps for ix in step.values()),
                "eval": args.rounds * sum(len(evals.data[t]["dev"]) for t in evals.tasks)}
    implementation = runs["minbert"].model.encoder.config.implementation
    out = {"precision": precision, "tf32": inputs.tf32 and precision == "fp32", "implementation": implementation,
           "minbert_path": FAST_PATH if args.fast_path else TRAINERS_PATH, "tasks": list(inputs.tasks),
           "steps_per_round": per_round, "peak_mib": peaks}
    for phase in ("train", "eval"):
        for name in runs:
            out[f"{name}_{phase}_examples_per_s"] = examples[phase] / sum(seconds[name, phase])
        out[f"{phase}_ratio"] = statistics.median(t / m for m, t in zip(seconds["minbert", phase],
                                                                        seconds["transformers", phase]))
    out["minbert_ms_per_step"] = 1000 * sum(seconds["minbert", "train"]) / (per_round * args.rounds)
    out["transformers_ms_per_step"] = 1000 * sum(seconds["transformers", "train"]) / (per_round * args.rounds)
    del runs
    if cuda:
        torch.cuda.empty_cache()
    return out
