"""Ablation sweeps: change the pretrained model, fine-tune it as train_multitask.py would, measure.

A sweep is a list of trials, one per configuration x seed x data fraction.
The checkpoint and the tokenised data are loaded once (`trainer.prepare`);
each trial changes a copy of the encoder and hands it to `trainer.fit`, so
the training is the trainer's own. Each finished trial is appended to
results.jsonl at once: rerunning the same command skips the trials already
there (so a killed sweep resumes), and a trial that crashed is recorded as
"failed" and retried next time rather than silently dropped.

A sweep can be split into shards (`--shard I/N`) run at once on several GPUs
or machines sharing the folder: a trial's shard is a hash of its name, each
shard appends to its own results.shard-I-of-N.jsonl, and every results file
in the folder counts as done and is merged for the summary (`--summarize`).

    reinit    re-draw chosen layers or heads with BERT's initialisation
    permute   run the layers in another order
    probe     freeze layers 0..k-1 and train only a linear head on layer k
    transfer  fine-tune on an intermediate task, then on the final one
    dynamics  how far fine-tuning moves each layer (weights, attention, representations)
"""
import argparse
import copy
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import math
import random
import re
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

import minbert
from minbert import UserError
from minbert.analysis import layer_weight_distances, layerwise_attention_js, layerwise_svcca

from .encoded import make_batch
from .fileio import (append_jsonl, atomic_save_torch, atomic_write_bytes, atomic_write_text, read_jsonl,
                     safe_join)
from .heads import sequences
from .options import add_training_args
from .trainer import Interrupted, RunInputs, fit, precision_note, prepare

RESULTS, SUMMARY = "results.jsonl", "summary.csv"
SHARD_RESULTS = re.compile(r"results\.shard-\d+-of-\d+\.jsonl")
POOLINGS = ("first", "mean")          # probe: layer k's raw [CLS] state, or its mean-pooled tokens


# ---------------------------------------------------------------------------- option syntax
# argparse `type=` converters: a malformed value is rejected before anything is loaded. Whether a
# layer or head exists depends on the model and is checked when the sweep is planned.


def _items(text: str) -> list:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("empty list")
    return list(dict.fromkeys(items))


def _int(text: str, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} must be >= {minimum}")
    return value


def int_list(text: str) -> list:
    return list(dict.fromkeys(_int(t) for t in _items(text)))


def fraction_list(text: str) -> list:
    out = []
    for t in _items(text):
        try:
            value = float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{t!r} is not a number") from None
        if not 0 < value <= 1:
            raise argparse.ArgumentTypeError(f"{t} is not in (0, 1]")
        out.append(value)
    return list(dict.fromkeys(out))  # "0.1,0.10" is one fraction, not two runs of each trial


def from_layer_list(text: str) -> list:
    """k values of "layers >= k reinitialised"; 'all' is 0 and 'none' (None) the layer count."""
    return [None if t == "none" else 0 if t == "all" else _int(t) for t in _items(text)]


def block_list(text: str) -> list:
    """START:SIZE blocks of consecutive layers."""
    out = []
    for t in _items(text):
        start, sep, size = t.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"{t!r} is not START:SIZE (e.g. 2:2)")
        out.append((_int(start), _int(size, minimum=1)))
    return out


def head_list(text: str) -> list:
    """LAYER:HEAD pairs; LAYER:* (HEAD None) stands for every head of the layer."""
    out = []
    for t in _items(text):
        layer, sep, head = t.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"{t!r} is not LAYER:HEAD or LAYER:* (e.g. 3:5)")
        out.append((_int(layer), None if head.strip() == "*" else _int(head)))
    return out


def shard(text: str):
    """I/N: shard I (1-based) of N, as (I, N); 1/1 is the whole sweep (None)."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 1 <= I <= N (e.g. 2/4: the second of four "
                                         f"shards)")
    return None if n == 1 else (i, n)


def permutation(text: str) -> list:
    order = [_int(t) for t in text.split(",") if t.strip()]
    if sorted(order) != list(range(len(order))):
        raise argparse.ArgumentTypeError(f"{text} is not a permutation of 0..{len(order) - 1}")
    return order


# ---------------------------------------------------------------------------- trials


@dataclass
class Trial:
    mode: str
    config: str          # the configuration's label: "from=3", "head=2:5", "layer=4,pooling=mean", ...
    params: dict         # the same as values, for the trial itself and for the plots
    seed: int
    fraction: float
    group: str = ""      # what the summary pools over seeds; the configuration unless set

    def __post_init__(self):
        self.group = self.group or self.config

    @property
    def name(self) -> str:
        """The trial's TensorBoard run name: folder-safe, and one per trial (the fraction in full where :g would
        round it, or two fractions would share a folder and, for dynamics, a saved model)."""
        fraction = f"{self.fraction:g}" if float(f"{self.fraction:g}") == self.fraction else repr(self.fraction)
        return re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{self.mode}-{self.config}-seed{self.seed}-frac{fraction}")

    def key(self, fingerprint: str) -> str:
        return f"{self.mode}|{self.config}|seed={self.seed}|fraction={self.fraction!r}|{fingerprint}"


def intermediate_stage(trial: Trial, task: str) -> Trial:
    """The intermediate fine-tuning on `task` a transfer trial starts from; its name is its TensorBoard run."""
    return dataclasses.replace(trial, config=f"intermediate={task}", params={"via": task}, group="")


def shard_of(trial: Trial, count: int) -> int:
    """The shard (1..count) that runs `trial`: a hash of its name, never of its place in the plan.

    So adding seeds, fractions or layers never moves a trial already assigned,
    and two shards never write the same trial's folder. Transfer trials hash
    their intermediate stage instead: the trials that share an intermediate
    model run in one shard, which trains it once and alone writes its folder.
    """
    via = trial.params.get("via") if trial.mode == "transfer" else None
    unit = intermediate_stage(trial, via).name if via else trial.name
    return int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "big") % count + 1


def shard_trials(trials: list, shard) -> list:
    """The trials of shard (I, N), in plan order; all of them for None."""
    return trials if shard is None else [t for t in trials if shard_of(t, shard[1]) == shard[0]]


@dataclass(frozen=True)
class Shape:
    num_layers: int
    num_heads: int


def grid(mode: str, configs: list, seeds, fractions) -> list:
    """Every configuration at every seed and fraction: a whole curve at the first seed comes first."""
    configs = list(dict(configs).items())  # drop repeated labels, keep the order
    return [Trial(mode, label, params, seed, fraction)
            for seed in seeds for fraction in fractions for label, params in configs]


def plan_reinit(args, shape: Shape) -> list:
    """`--from-layer`, `--block` and `--heads` schemes, plus the unmodified model as reference."""
    n, emb = shape.num_layers, args.reinit_embeddings
    suffix = ",emb" if emb else ""

    def layers(label, scheme, chosen, **extra):
        return label + suffix, {"scheme": scheme, "layers": sorted(chosen), "embeddings": emb, **extra}

    configs = [(f"from={n}", {"scheme": "from", "layers": [], "embeddings": False, "from": n})]
    froms = args.from_layer or ([] if args.block or args.heads else list(range(n, -1, -1)))
    for k in froms:
        k = n if k is None else k
        if k > n:
            raise UserError(f"--from-layer {k}: the model has {n} layers (k in 0..{n}; {n} = none)")
        configs.append(layers(f"from={k}", "from", range(k, n), **{"from": k}))
    for start, size in args.block or ():
        if start + size > n:
            raise UserError(f"--block {start}:{size}: layers {start}..{start + size - 1} are past the model's "
                            f"{n} layers (0..{n - 1})")
        block = set(range(start, start + size))
        configs.append(layers(f"block={start}:{size}", "block", block, start=start, size=size))
        configs.append(layers(f"keep={start}:{size}", "keep", set(range(n)) - block, start=start, size=size))
    for layer, head in args.heads or ():
        if layer >= n:
            raise UserError(f"--heads {layer}:{'*' if head is None else head}: the model has layers 0..{n - 1}")
        if head is not None and head >= shape.num_heads:
            raise UserError(f"--heads {layer}:{head}: head {head} is past the model's {shape.num_heads} heads "
                            f"(0..{shape.num_heads - 1})")
        for h in range(shape.num_heads) if head is None else (head,):
            configs.append((f"head={layer}:{h}{suffix}",
                            {"scheme": "head", "layer": layer, "head": h, "embeddings": emb}))
    return grid("reinit", configs, args.seed_list, args.fraction_list)


def plan_permute(args, shape: Shape) -> list:
    """The original order, `--order`, and `--trials` distinct random orders (seeded by --permutation-seed)."""
    n = shape.num_layers
    orders = [list(range(n))]
    if args.order is not None:
        if len(args.order) != n:
            raise UserError(f"--order lists {len(args.order)} layers; the model has {n} (a permutation of "
                            f"0..{n - 1})")
        if args.order not in orders:  # the original order given again would cost one of the --trials
            orders.append(args.order)
    rng = random.Random(args.permutation_seed)
    wanted = min(len(orders) + args.trials, math.factorial(n))
    while len(orders) < wanted:
        order = rng.sample(range(n), n)
        if order not in orders:
            orders.append(order)
    configs = [("order=" + "-".join(map(str, o)), {"order": o, "original": o == orders[0]}) for o in orders]
    return grid("permute", configs, args.seed_list, args.fraction_list)


def plan_probe(args, shape: Shape) -> list:
    """Probe each layer k with each pooling, plus an all-reinitialised model as the control."""
    n = shape.num_layers
    ks = args.layers if args.layers is not None else range(n + 1)
    for k in ks:
        if k > n:
            raise UserError(f"--layers {k}: the model has {n} layers (k in 0..{n}; 0 = the embeddings)")
    configs = [(f"layer={k},pooling={p}", {"layer": k, "pooling": p, "control": False}) for k in ks for p in POOLINGS]
    configs += [(f"layer={n},pooling={p},random", {"layer": n, "pooling": p, "control": True}) for p in POOLINGS]
    return grid("probe", configs, args.seed_list, args.fraction_list)


def plan_transfer(args, shape: Shape) -> list:
    """Direct fine-tuning on each task, then every ordered (intermediate, final) pair."""
    tasks = args.task_list
    if len(tasks) < 2:
        raise UserError("--mode transfer needs at least two tasks (--task all, or --tasks sst,sts)")
    configs = [(f"via=none,final={b}", {"via": None, "final": b}) for b in tasks]
    configs += [(f"via={a},final={b}", {"via": a, "final": b}) for a in tasks for b in tasks if a != b]
    return grid("transfer", configs, args.seed_list, args.fraction_list)


def plan_dynamics(args, shape: Shape) -> list:
    """Per fraction: one fine-tuning per seed, then every pair of those seeds compared."""
    trials = []
    for fraction in args.fraction_list:
        trials += [Trial("dynamics", "finetune", {"kind": "finetune"}, s, fraction) for s in args.seed_list]
        trials += [Trial("dynamics", f"seeds={a}-{b}", {"kind": "seeds", "seeds": [a, b]}, a, fraction,
                         group="seed-vs-seed") for a, b in itertools.combinations(args.seed_list, 2)]
    return trials


# ---------------------------------------------------------------------------- running one trial


class Sweep:
    """What the trials of one sweep share: the arguments, the inputs loaded once, the output folder."""

    def __init__(self, args, inputs: RunInputs, out_dir):
        self.args, self.inputs, self.out = args, inputs, Path(out_dir)
        self.shape = Shape(inputs.encoder.num_layers, inputs.encoder.config.num_attention_heads)
        self.fingerprint = fingerprint(args, inputs)
        self.shard = args.shard
        self._intermediate = (None, None)   # transfer: the last intermediate model, reused by the next trial
        self._batches = None

    def pretrained_copy(self) -> minbert.BertModel:
        return copy.deepcopy(self.inputs.encoder)

    def run_trial(self, trial: Trial) -> dict:
        """The trial's fit result ("best", "final", "model", ...), plus "curves"/"info" where it has them."""
        return MODES[trial.mode].run(self, trial)

    def fit(self, trial: Trial, encoder, name: Optional[str] = None, tasks=None, **changes) -> dict:
        """Fine-tune `encoder` exactly as train_multitask.py would, logging to tensorboard/<name>.

        Nothing else is written: a trial is cheap to rerun, and a checkpoint per trial
        would take gigabytes over a sweep.
        """
        args = copy.copy(self.args)
        tasks = tuple(tasks or self.inputs.tasks)
        args.seed, args.data_fraction, args.tasks, args.task_list = trial.seed, trial.fraction, ",".join(tasks), tasks
        vars(args).update(changes)
        folder = self.fresh_dir("tensorboard", name or trial.name)
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(str(folder))
        try:
            result = fit(args, dataclasses.replace(self.inputs, tasks=tasks), folder, encoder=encoder, quiet=True,
                         writer=writer, write_outputs=False, save_predictions=False)
            writer.add_hparams({"mode": trial.mode, "config": trial.config, "seed": trial.seed,
                                "data_fraction": trial.fraction, "tasks": args.tasks, "stage": name or "trial"},
                               {f"hparam/{k}": v for k, v in result["best"].items() if v is not None},
                               run_name="hparams")
        finally:
            writer.close()
        return result

    def fresh_dir(self, *parts) -> Path:
        """An empty folder below the output folder: a retried trial's curves replace, not join, the old ones."""
        folder = safe_join(self.out, *parts)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def intermediate(self, task: str, trial: Trial):
        """The encoder fine-tuned on `task` (trial's seed and fraction), shared by consecutive transfer trials."""
        key = (task, trial.seed, trial.fraction)
        if self._intermediate[0] != key:
            self._intermediate = (None, None)  # let the previous model go before training the next
            stage = intermediate_stage(trial, task)
            result = self.fit(stage, self.inputs.encoder, name=stage.name, tasks=(task,))
            self._intermediate = (key, (result["model"].encoder, result["best"]))
        return self._intermediate[1]

    def analysis_batches(self) -> list:
        """The dev sentences the dynamics compare models on: the first --dynamics-examples of each task."""
        if self._batches is None:
            self._batches = analysis_batches(self.inputs, self.args.dynamics_examples)
        return self._batches

    def compare(self, a: minbert.BertModel, b: minbert.BertModel) -> dict:
        """`compare_encoders` on the analysis batches' device (the pretrained and reloaded models are on the CPU)."""
        device = self.inputs.device  # "cuda" names cuda:0, so the kinds are compared, not the devices
        a, b = (m if next(m.parameters()).device.type == device.type else copy.deepcopy(m).to(device) for m in (a, b))
        return compare_encoders(a, b, self.analysis_batches())

    def model_path(self, trial: Trial) -> Path:
        return safe_join(self.out, "models", trial.name + ".pt")

    def fine_tuned(self, trial: Trial, seed: int) -> minbert.BertModel:
        """The dynamics fine-tuning of `seed` (saved by its trial; redone if the file is not there yet).

        Under --shard that trial may belong to another shard, still running:
        the redone fine-tuning logs under a name of this shard's own (the
        model file is written atomically, so either copy is whole).
        """
        finetune = Trial("dynamics", "finetune", {"kind": "finetune"}, seed, trial.fraction)
        path = self.model_path(finetune)
        if not path.exists():
            name = finetune.name + (f"-redone-shard-{self.shard[0]}-of-{self.shard[1]}" if self.shard else "")
            fine_tune_and_save(self, finetune, name)
        encoder = self.pretrained_copy()
        encoder.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return encoder


def run_reinit(sweep: Sweep, trial: Trial) -> dict:
    p = trial.params
    encoder = sweep.pretrained_copy()
    generator = torch.Generator().manual_seed(trial.seed)
    if p["scheme"] == "head":
        minbert.reinit_heads(encoder, [(p["layer"], p["head"])], generator)
    else:
        minbert.reinit_layers(encoder, p["layers"], generator)
    if p["embeddings"]:
        minbert.reinit_embeddings(encoder, generator)
    return sweep.fit(trial, encoder)


def run_permute(sweep: Sweep, trial: Trial) -> dict:
    return sweep.fit(trial, minbert.permute_layers(sweep.pretrained_copy(), trial.params["order"]))


def run_probe(sweep: Sweep, trial: Trial) -> dict:
    """Layers 0..k-1 kept and frozen whole (pooler too): only the task's linear head trains.

    Freezing here rather than through --freeze-until also covers k = 0, where
    freeze_until would have no layer to count.
    """
    p = trial.params
    encoder = minbert.truncate_layers(sweep.pretrained_copy(), p["layer"])
    if p["control"]:
        minbert.reinit_layers_from(encoder, 0, torch.Generator().manual_seed(trial.seed))
    encoder.requires_grad_(False)
    return sweep.fit(trial, encoder, pooling=p["pooling"], freeze_until=0)  # 0: leave it as frozen here


def run_transfer(sweep: Sweep, trial: Trial) -> dict:
    via, final = trial.params["via"], trial.params["final"]
    if via is None:
        return sweep.fit(trial, sweep.inputs.encoder, tasks=(final,))
    encoder, intermediate_dev = sweep.intermediate(via, trial)
    result = sweep.fit(trial, encoder, tasks=(final,))
    result["info"] = {"intermediate_dev": intermediate_dev}
    return result


def run_dynamics(sweep: Sweep, trial: Trial) -> dict:
    if trial.params["kind"] == "seeds":
        a, b = (sweep.fine_tuned(trial, s) for s in trial.params["seeds"])
        return {"curves": sweep.compare(a, b)}
    result = fine_tune_and_save(sweep, trial)
    result["curves"] = sweep.compare(sweep.inputs.encoder, result["model"].encoder)
    return result


def fine_tune_and_save(sweep: Sweep, trial: Trial, name: Optional[str] = None) -> dict:
    """Fine-tune for dynamics and keep the encoder in models/, for the seed-vs-seed comparisons."""
    result = sweep.fit(trial, sweep.inputs.encoder, name=name)
    atomic_save_torch(sweep.model_path(trial), result["model"].encoder.state_dict())
    return result


@dataclass(frozen=True)
class Mode:
    plan: Callable
    run: Callable


MODES = {"reinit": Mode(plan_reinit, run_reinit), "permute": Mode(plan_permute, run_permute),
         "probe": Mode(plan_probe, run_probe), "transfer": Mode(plan_transfer, run_transfer),
         "dynamics": Mode(plan_dynamics, run_dynamics)}


# ---------------------------------------------------------------------------- dynamics


def analysis_batches(inputs: RunInputs, per_task: int, batch_size: int = 32) -> list:
    """Encoder inputs (one dict per sequence batch) of the first `per_task` dev examples of each task."""
    batches = []
    for task in inputs.tasks:
        split = inputs.data[task]["dev"]
        order = sorted(range(min(per_task, len(split))), key=split.lengths.__getitem__)
        for start in range(0, len(order), batch_size):
            batch = make_batch(split, order[start:start + batch_size], inputs.tokenizer, inputs.device)
            batches.extend(sequences(batch))
    return batches


@torch.no_grad()
def compare_encoders(a: minbert.BertModel, b: minbert.BertModel, batches: list, seed: int = 0) -> dict:
    """Per layer: L2 distance of the weights, JS divergence of the attention, SVCCA distance of the tokens.

    Padding is left out of both: attention JS is averaged over real query tokens
    (weighted across batches by their count) and SVCCA sees only real tokens.
    The SVCCA list starts with the embeddings' output (index 0).
    """
    modes = a.training, b.training
    a.eval(), b.eval()
    try:
        js_sum, real = np.zeros(a.num_layers), 0
        hidden_a, hidden_b = [[] for _ in range(a.num_layers + 1)], [[] for _ in range(b.num_layers + 1)]
        for seq in batches:
            out_a = a(**seq, output_hidden_states=True, output_attentions=True)
            out_b = b(**seq, output_hidden_states=True, output_attentions=True)
            mask = seq["attention_mask"].bool()
            tokens = int(mask.sum())
            js_sum += tokens * np.array(layerwise_attention_js(out_a.attentions, out_b.attentions, mask))
            real += tokens
            for i, (ha, hb) in enumerate(zip(out_a.hidden_states, out_b.hidden_states)):
                hidden_a[i].append(ha[mask].float().cpu())
                hidden_b[i].append(hb[mask].float().cpu())
        svcca = layerwise_svcca([torch.cat(h)[None] for h in hidden_a], [torch.cat(h)[None] for h in hidden_b],
                                None, seed=seed)
    finally:
        a.train(modes[0]), b.train(modes[1])
    return {"weight_l2": layer_weight_distances(a.state_dict(), b.state_dict(), a.num_layers),
            "attention_js": (js_sum / max(real, 1)).tolist(), "svcca": svcca}


# ---------------------------------------------------------------------------- the sweep


def fingerprint(args, inputs: RunInputs) -> str:
    """Hash of everything a trial's result depends on besides its own seed, fraction and configuration.

    Every training option counts, the weights and data by their hashes (not
    their paths), so a rerun with other options starts afresh in the same folder.
    Where it runs does not count (--device, the data's path, what --precision auto
    chose there): shards on other machines, and --summarize on a machine without a
    GPU, must agree on it. Each results line records the precision its trial used.
    """
    options = vars(add_training_args(argparse.ArgumentParser()).parse_args([]))
    values = {k: getattr(args, k) for k in sorted(set(options) - {"seed", "data_fraction", "out", "checkpoint_every",
                                                                   "model", "data_dir", "device"})}
    values["precision"] = getattr(args, "precision_requested", args.precision)  # auto: each machine's fast one
    values["tasks"] = ",".join(args.task_list)
    values["weights"] = inputs.encoder.source.weights_sha256 if inputs.encoder.source else args.model
    values["data"] = {task: {split: d and {k: v for k, v in d.items() if k != "path"} for split, d in splits.items()}
                      for task, splits in inputs.data_record.items()}
    if args.mode == "dynamics":
        values["dynamics_examples"] = args.dynamics_examples
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def results_name(shard) -> str:
    return RESULTS if shard is None else f"results.shard-{shard[0]}-of-{shard[1]}.jsonl"


def results_files(folder: Path) -> list:
    """results.jsonl and every shard's file, whatever shard count they were run with."""
    return sorted(p for p in folder.glob("results*.jsonl") if p.name == RESULTS or SHARD_RESULTS.fullmatch(p.name))


def load_results(path: Path) -> list:
    """The trials recorded in this process's own results file; a torn last line (a killed write) is dropped from
    the file too."""
    records = read_jsonl(path)
    if path.exists():
        data = path.read_bytes()
        if data and (not data.endswith(b"\n") or len([l for l in data.split(b"\n") if l.strip()]) != len(records)):
            atomic_write_text(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in records))
    return records


def merged_results(folder: Path, own: Optional[Path] = None) -> list:
    """Every record of every results file in the folder. Only `own` is repaired: the other files are other
    shards', possibly being appended to right now, and rewriting one could drop the line being appended."""
    return [r for path in results_files(folder) for r in (load_results(path) if path == own else read_jsonl(path))]


def attempt(sweep: Sweep, trial: Trial) -> dict:
    """Run one trial and return its results line; a crash becomes a "failed" line, retried on the next run."""
    started = time.time()
    record = {"key": trial.key(sweep.fingerprint), "mode": trial.mode, "config": trial.config, "group": trial.group,
              "params": trial.params, "seed": trial.seed, "data_fraction": trial.fraction,
              "fingerprint": sweep.fingerprint, "precision": sweep.args.precision, "device": str(sweep.inputs.device)}
    try:
        result = sweep.run_trial(trial)
    except (UserError, Interrupted):
        raise
    except Exception as e:
        return {**record, "status": "failed", "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=-8), "wall_time_s": round(time.time() - started, 1),
                "finished_at": _utc_now()}
    found = {"dev": result.get("best"), "dev_final": result.get("final"), "best_epoch": result.get("best_epoch"),
             "steps": result.get("steps"), "curves": result.get("curves"), "info": result.get("info")}
    return {**record, "status": "ok", **{k: v for k, v in found.items() if v is not None},
            "wall_time_s": round(time.time() - started, 1), "finished_at": _utc_now()}


def _utc_now() -> str:
    """UTC, so that shards on machines in other time zones agree on which record of a trial is the latest."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Progress:
    """A tqdm bar over the whole sweep on a terminal; otherwise one line per trial with the time left."""

    def __init__(self, total: int, done: int):
        self.total, self.done = total, done
        self.started, self.ran = time.time(), 0
        self.bar = None
        if sys.stdout.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=done, unit="trial", dynamic_ncols=True, desc="sweep")

    def update(self, trial: Trial, record: dict):
        self.done += 1
        self.ran += 1
        if record["status"] == "ok":
            dev = record.get("dev") or {}
            outcome = " ".join(f"{k}={v:.4f}" for k, v in dev.items() if v is not None) or "ok"
        else:
            outcome = f"FAILED ({record['error'][:120]})"
        line = f"[{self.done}/{self.total}] {trial.mode} {trial.config} seed={trial.seed} " \
               f"fraction={trial.fraction:g}: {outcome} ({record['wall_time_s']:.0f}s)"
        if self.bar is not None:
            self.bar.update(1)
            self.bar.write(line)
            return
        left = (time.time() - self.started) / self.ran * (self.total - self.done)
        print(line + (f", about {_duration(left)} left" if self.done < self.total else ""), flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def headline_metric(tasks) -> str:
    """The metric a plot shows: the task's own for one task, the course's overall score for several."""
    return f"dev/{tasks[0]}" if len(tasks) == 1 else "dev/overall"


def run(args) -> int:
    """Plan, run (skipping finished trials), summarise and plot one sweep, or one shard of it; 1 if a trial
    failed. With --summarize, only merge the results files and write the summary."""
    if args.summarize:
        args.device = "cpu"  # nothing trains; the fingerprint does not depend on it
    inputs = prepare(args)
    sweep = Sweep(args, inputs, args.out)
    trials = MODES[args.mode].plan(args, sweep.shape)  # out-of-range layers/heads stop here, before any trial
    src = inputs.encoder.source
    print(f"model: {src.name} ({src.resolved_from}, {src.num_layers} layers x {sweep.shape.num_heads} heads); "
          f"device {inputs.device}; {precision_note(args, inputs.device)}; sweep folder {args.out}", flush=True)
    if args.summarize:
        if not results_files(sweep.out):
            raise UserError(f"{sweep.out}: no results.jsonl or results.shard-*.jsonl to summarise (--out must be "
                            f"the sweep's folder)")
        records = merged_results(sweep.out)
        note_other_options(sweep, records)
        report(sweep, trials, records)
        return 0
    if args.mode == "dynamics" and len(args.seed_list) < 2:
        print("note: one seed, so no seed-vs-seed comparison (pass --seeds 0,1 for one)", flush=True)
    path = sweep.out / results_name(args.shard)
    previous = merged_results(sweep.out, own=path)
    done = {r["key"] for r in finished(previous, args.mode, sweep.fingerprint)}
    mine = shard_trials(trials, args.shard)
    pending = [t for t in mine if t.key(sweep.fingerprint) not in done]
    share = f"shard {args.shard[0]}/{args.shard[1]}: {len(mine)} of {len(trials)}" if args.shard else len(trials)
    print(f"{args.mode}: {share} trials, {len(mine) - len(pending)} already finished in {sweep.out}; results go to "
          f"{path.name}", flush=True)
    note_other_options(sweep, previous)
    failed = run_trials(sweep, pending, len(mine), path)
    if not report(sweep, trials, merged_results(sweep.out, own=path), write=args.shard is None):
        print(f"summary: written by the shard that finishes the sweep, or now by the same command with "
              f"--summarize in place of --shard", flush=True)
    if failed:
        print(f"error: {failed} of {len(pending)} trials failed (recorded in {path}); rerun the same command to "
              f"retry them", file=sys.stderr)
        return 1
    return 0


def run_trials(sweep: Sweep, pending: list, total: int, path: Path) -> int:
    """Run and record each trial as it finishes; the number that failed."""
    progress = Progress(total, total - len(pending))
    failed = 0
    try:
        for trial in pending:
            record = attempt(sweep, trial)
            append_jsonl(path, record)
            failed += record["status"] != "ok"
            progress.update(trial, record)
    except Interrupted as e:
        raise Interrupted(e.exit_code - 128, f"stopped by a signal; finished trials are in {path}; rerun the same "
                                             f"command to resume") from None
    finally:
        progress.close()
    return failed


def note_other_options(sweep: Sweep, records: list):
    others = sum(r.get("mode") == sweep.args.mode and r.get("fingerprint") != sweep.fingerprint for r in records)
    if others:
        print(f"note: {others} lines of the results in {sweep.out} were run with other training options, model or "
              f"data; they are left out of this sweep's summary", flush=True)


def report(sweep: Sweep, trials: list, records: list, write: bool = True) -> bool:
    """Print how many of the sweep's trials are finished, missing and failed, over every results file, and
    write summary.csv and the plots; a shard (write=False) writes them only once the sweep is complete, so
    two shards finishing at once both write the same thing. Whether they were written."""
    ok = finished(records, sweep.args.mode, sweep.fingerprint)
    ok_keys = {r["key"] for r in ok}
    failed_keys = {r["key"] for r in records if r.get("status") == "failed"} - ok_keys
    keys = [t.key(sweep.fingerprint) for t in trials]
    n_ok, n_failed = sum(k in ok_keys for k in keys), sum(k in failed_keys for k in keys)
    print(f"sweep: {len(trials)} trials: {n_ok} finished, {len(trials) - n_ok - n_failed} missing, {n_failed} "
          f"failed", flush=True)
    if not write and n_ok < len(trials):
        return False
    rows = summarise(ok)
    write_summary(sweep.out / SUMMARY, rows)
    written = write_plots(sweep, ok, rows, headline_metric(sweep.inputs.tasks))
    print(f"summary: {sweep.out / SUMMARY}; plots: {', '.join(written) or 'none'}", flush=True)
    return True


# ---------------------------------------------------------------------------- summary and plots


def finished(records: list, mode: str, fp: str) -> list:
    """This sweep's successful trials, one record per trial however many files hold it (the latest), so a
    trial run twice counts once in the intervals."""
    latest = {}
    for r in records:
        if r.get("status") == "ok" and r.get("mode") == mode and r.get("fingerprint") == fp and \
                r.get("finished_at", "") >= latest.get(r["key"], {}).get("finished_at", ""):
            latest[r["key"]] = r
    return list(latest.values())


def trial_metrics(record: dict) -> dict:
    """Every number a trial measured: dev metrics as dev/<task>, per-layer curves as <curve>/<layer>."""
    out = {f"dev/{k}": v for k, v in (record.get("dev") or {}).items() if v is not None}
    for name, values in (record.get("curves") or {}).items():
        out.update({f"{name}/{i}": v for i, v in enumerate(values)})
    return out


def interval(values) -> dict:
    """Mean, sample std and 95% t-interval of the mean; no spread from a single value."""
    from scipy import stats
    x = np.asarray(values, dtype=np.float64)
    n, mean = len(x), float(x.mean())
    if n < 2:
        return {"n": n, "mean": mean, "std": None, "ci95_low": None, "ci95_high": None}
    std = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}


def summarise(records: list) -> list:
    """One row per configuration group, data fraction and metric, over the seeds."""
    groups = {}
    for r in records:
        groups.setdefault((r["mode"], r["group"], r["data_fraction"]), []).append(r)
    rows = []
    for (mode, group, fraction), members in groups.items():
        values = {}
        for r in members:
            for name, value in trial_metrics(r).items():
                values.setdefault(name, []).append(value)
        rows += [{"mode": mode, "config": group, "data_fraction": fraction, "metric": name, **interval(v),
                  "params": members[0]["params"]} for name, v in values.items()]
    return rows


SUMMARY_COLUMNS = ("mode", "config", "data_fraction", "metric", "n", "mean", "std", "ci95_low", "ci95_high")


def write_summary(path: Path, rows: list):
    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\n")
    out.writerow(SUMMARY_COLUMNS)
    for row in rows:
        out.writerow(["" if row[c] is None else round(row[c], 6) if isinstance(row[c], float) else row[c]
                      for c in SUMMARY_COLUMNS])
    atomic_write_text(path, buffer.getvalue())


def write_plots(sweep: Sweep, records: list, rows: list, metric: str) -> list:
    """PNG files in plots/, and the same figures as images in TensorBoard (run 'summary')."""
    from torch.utils.tensorboard import SummaryWriter
    from . import plots
    figures = plots.figures(sweep.args.mode, records, rows, metric, sweep.shape.num_layers,
                            sweep.shape.num_heads, sweep.inputs.tasks)
    if not figures:
        return []
    written = []
    writer = SummaryWriter(str(safe_join(sweep.out, "tensorboard", "summary")))
    try:
        for name, fig in figures.items():
            path = safe_join(sweep.out, "plots", f"{name}.png")
            atomic_write_bytes(path, plots.png_bytes(fig))
            writer.add_figure(f"ablation/{name}", fig, global_step=len(records))
            written.append(str(path))
    finally:
        writer.close()
    return written
