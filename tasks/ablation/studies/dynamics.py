"""dynamics: how far fine-tuning moves each layer of the pretrained model.

After Hao et al. (2020), "Investigating Learning Dynamics of BERT Fine-Tuning":
per layer, the L2 distance of the weights (plotted: Singh & Giovanardi's output
sub-layer dense weight; every tensor's distance is kept in the results), the
Jensen-Shannon divergence of the attention averaged per sentence (padding
excluded) and the SVCCA distance (Raghu et al., 2017) of the token
representations (`minbert/analysis.py`), on a seeded sample of --dynamics-examples
dev examples of each task, the same sample for every comparison. Protocol, per
data fraction: one fine-tuning per seed, compared with the pretrained model, and
every pair of those seeds compared with each other (how much of the change is seed
noise). Each fine-tuned encoder is kept in models/ for the seed-vs-seed trials. The summary
compares the fine-tuning's change with that floor per layer (change_* columns, reference
seed-vs-seed: the change minus the seeds' difference, its interval over the seeds; 3 seeds or
more for an interval). Weight change against data size: pass several --data-fractions.

`--across-tasks` (two or more tasks) adds Hao et al.'s consistency between datasets: per seed, a
fine-tuning on each task alone (`finetune,task=T`, compared with the pretrained model) and every
pair of those compared with each other (`tasks=A-B`) on the sample of every task's dev examples
(Hao et al. used 200 of each of the two), beside each task's own seed-vs-seed floor
(`seeds=A-B,task=T`).
"""
import copy
import itertools
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import minbert
from minbert import UserError
from minbert.analysis import (
    OUTPUT_SUBLAYER_WEIGHT,
    layer_tensor_distances,
    layerwise_attention_js,
    layerwise_svcca,
    svcca_sample,
    whole_layer_distances,
)

from ...encoded import make_batch
from ...fileio import atomic_save_torch, safe_join
from ...heads import sequences
from ...inputs import RunInputs
from ..arguments import positive_or_all
from ..drawing import errorbar, fractions_of, legend, new_figure
from ..study import Shape, Study, Trial, planned

# Sentences vary: on SST after 100 fine-tuning steps the top layer's per-sentence attention JS
# had a standard deviation of 0.035 around a mean of 0.097, so 500 sentences put its standard
# error at 0.0016 (under 2% of the mean, and well under the steps between layers), and their
# tokens are more than SVCCA needs (svcca_sample). The whole dev set costs more for no visible
# gain.
DYNAMICS_EXAMPLES = 500


def add_arguments(group):
    group.add_argument("--across-tasks", action="store_true",
                       help="also fine-tune on each task alone and compare every two tasks' models, per seed (Hao et "
                            "al.'s consistency between datasets; needs two or more tasks)")
    group.add_argument("--dynamics-examples", type=positive_or_all, default=DYNAMICS_EXAMPLES, metavar="N|all",
                       help="dev examples per task the models are compared on: a seeded sample, the same for "
                            "every comparison, or 'all' for the whole dev set (default: %(default)s, enough for a "
                            "standard error of each layer's mean attention JS under 2%% of it)")


@dataclass(frozen=True)
class Options:
    across_tasks: bool = planned(False)              # also fine-tune per task and compare tasks
    dynamics_examples: Optional[int] = DYNAMICS_EXAMPLES  # dev examples per task compared on; None: all


def note(config):
    if len(config.seeds) < 2:
        return "one seed, so no seed-vs-seed comparison (pass --seeds 0,1 for one)"
    if len(config.seeds) < 3:
        return "two seeds: the change above the seed-vs-seed floor has no interval (3 seeds or more give one)"
    return None


def trials(config, shape: Shape) -> list:
    """Per fraction: one fine-tuning per seed, then every pair of those seeds compared; with --across-tasks the
    same per task alone, and every pair of tasks compared at each seed."""
    options = config.options
    tasks = config.training.task_list
    if options.across_tasks and len(tasks) < 2:
        raise UserError("--across-tasks compares fine-tunings on different tasks: give two or more (--tasks sst,sts)")
    trials = []
    for fraction in config.fractions:
        for task in [None] + (list(tasks) if options.across_tasks else []):
            suffix = f",task={task}" if task else ""
            trials += [Trial("dynamics", "finetune" + suffix, {"kind": "finetune", "task": task}, s, fraction)
                       for s in config.seeds]
            trials += [Trial("dynamics", f"seeds={a}-{b}{suffix}", {"kind": "seeds", "seeds": [a, b], "task": task},
                             a, fraction, group="seed-vs-seed" + suffix)
                       for a, b in itertools.combinations(config.seeds, 2)]
        if options.across_tasks:
            trials += [Trial("dynamics", f"tasks={a}-{b}", {"kind": "tasks", "tasks": [a, b]}, s, fraction)
                       for a, b in itertools.combinations(tasks, 2) for s in config.seeds]
    return trials


def run(sweep, trial: Trial) -> dict:
    task = trial.params.get("task")
    if trial.params["kind"] == "seeds":
        a, b = (fine_tuned(sweep, trial, s, task) for s in trial.params["seeds"])
        return {"curves": compare(sweep, a, b)}
    if trial.params["kind"] == "tasks":
        a, b = (fine_tuned(sweep, trial, trial.seed, t) for t in trial.params["tasks"])
        return {"curves": compare(sweep, a, b)}
    result = fine_tune_and_save(sweep, trial)
    result["curves"] = compare(sweep, sweep.inputs.encoder, result["model"].encoder)
    return result


def fine_tune_and_save(sweep, trial: Trial, name: Optional[str] = None) -> dict:
    """Fine-tune (on the trial's task alone if it names one) and keep the encoder in models/, for the seed-vs-seed
    and task-vs-task comparisons."""
    task = trial.params.get("task")
    result = sweep.fit(trial, sweep.inputs.encoder, name=name, tasks=(task,) if task else None)
    atomic_save_torch(model_path(sweep, trial), result["model"].encoder.state_dict())
    return result


def model_path(sweep, trial: Trial):
    return safe_join(sweep.out, "models", trial.name + ".pt")


def finetune_trial(seed: int, fraction: float, task: Optional[str] = None) -> Trial:
    """The fine-tuning trial of `seed` (on `task` alone, or on every task)."""
    return Trial("dynamics", "finetune" + (f",task={task}" if task else ""), {"kind": "finetune", "task": task},
                 seed, fraction)


def fine_tuned(sweep, trial: Trial, seed: int, task: Optional[str] = None) -> minbert.BertModel:
    """The fine-tuning of `seed` (on `task` alone if given; saved by its trial, redone if the file is not there).

    Under --shard that trial may belong to another shard, still running:
    the redone fine-tuning logs under a name of this shard's own (the
    model file is written atomically, so either copy is whole).
    """
    finetune = finetune_trial(seed, trial.fraction, task)
    path, shard = model_path(sweep, finetune), sweep.config.shard
    if not path.exists():
        name = finetune.name + (f"-redone-shard-{shard[0]}-of-{shard[1]}" if shard else "")
        fine_tune_and_save(sweep, finetune, name)
    encoder = sweep.pretrained_copy()
    encoder.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return encoder


def compare(sweep, a: minbert.BertModel, b: minbert.BertModel) -> dict:
    """`compare_encoders` on the analysis batches' device (the pretrained and reloaded models are on the CPU)."""
    if "analysis_batches" not in sweep.cache:
        sweep.cache["analysis_batches"] = analysis_batches(sweep.inputs, sweep.options.dynamics_examples)
    device = sweep.inputs.device  # "cuda" names cuda:0, so the kinds are compared, not the devices
    a, b = (m if next(m.parameters()).device.type == device.type else copy.deepcopy(m).to(device) for m in (a, b))
    return compare_encoders(a, b, sweep.cache["analysis_batches"])


def analysis_batches(inputs: RunInputs, per_task: Optional[int], batch_size: int = 32, seed: int = 0) -> list:
    """Encoder inputs (one dict per sequence batch) of a seeded sample of `per_task` dev examples of each task
    (None: all of them), batched by length."""
    batches = []
    for task in inputs.tasks:
        split = inputs.data[task]["dev"]
        chosen = range(len(split))
        if per_task is not None and per_task < len(split):  # a task's sample does not depend on the other tasks
            chosen = np.random.default_rng(seed).choice(len(split), size=per_task, replace=False).tolist()
        order = sorted(chosen, key=split.lengths.__getitem__)
        for start in range(0, len(order), batch_size):
            batch = make_batch(split, order[start:start + batch_size], inputs.tokenizer, inputs.device)
            batches.extend(sequences(batch))
    return batches


@torch.no_grad()
def compare_encoders(a: minbert.BertModel, b: minbert.BertModel, batches: list, seed: int = 0) -> dict:
    """Per layer: L2 distances of the weights, JS divergence of the attention, SVCCA distance of the tokens.

    "weight_l2" is the output sub-layer's dense weight (Singh & Giovanardi),
    "weight_l2_layer" the whole layer's parameters as one vector, and
    "weight_l2.<tensor>" each tensor of the layer. Padding is left out of both
    representation measures: attention JS is each sentence's mean over its real
    tokens and heads, averaged over sentences (Hao et al.); SVCCA sees a seeded
    sample of the real tokens (`svcca_sample`: enough for the width it keeps), and
    its list starts with the embeddings' output (index 0).
    """
    modes = a.training, b.training
    a.eval(), b.eval()
    masks = [seq["attention_mask"].bool() for seq in batches]
    sample = torch.from_numpy(svcca_sample(sum(int(m.sum()) for m in masks), a.config.hidden_size, seed))
    try:
        js_sum, sentences, offset = np.zeros(a.num_layers), 0, 0
        hidden_a, hidden_b = [[] for _ in range(a.num_layers + 1)], [[] for _ in range(b.num_layers + 1)]
        for seq, mask in zip(batches, masks):
            out_a = a(**seq, output_hidden_states=True, output_attentions=True)
            out_b = b(**seq, output_hidden_states=True, output_attentions=True)
            js_sum += layerwise_attention_js(out_a.attentions, out_b.attentions, mask).sum(axis=1)
            sentences += mask.shape[0]
            tokens = int(mask.sum())
            mine = sample[(sample >= offset) & (sample < offset + tokens)] - offset
            offset += tokens
            for i, (ha, hb) in enumerate(zip(out_a.hidden_states, out_b.hidden_states)):
                hidden_a[i].append(ha[mask][mine.to(ha.device)].float().cpu())
                hidden_b[i].append(hb[mask][mine.to(hb.device)].float().cpu())
        svcca = layerwise_svcca([torch.cat(h)[None] for h in hidden_a], [torch.cat(h)[None] for h in hidden_b],
                                None, seed=seed)
    finally:
        a.train(modes[0]), b.train(modes[1])
    tensors = layer_tensor_distances(a.state_dict(), b.state_dict(), a.num_layers)
    return {"weight_l2": tensors[OUTPUT_SUBLAYER_WEIGHT],
            "weight_l2_layer": whole_layer_distances(tensors, a.num_layers),
            **{f"weight_l2.{name}": values for name, values in sorted(tensors.items())},
            "attention_js": (js_sum / max(sentences, 1)).tolist(), "svcca": svcca}


def reference(sweep, params) -> Optional[str]:
    """A fine-tuning's change is compared with the seed-vs-seed floor of the same training data."""
    if params["kind"] != "finetune":
        return None
    return "seed-vs-seed" + (f",task={params['task']}" if params["task"] else "")


CURVES = (("weight_l2", "L2 distance of the layer's output.dense.weight"),
          ("attention_js", "attention JS divergence (nats, per sentence)"),
          ("svcca", "SVCCA distance of token representations"))


def dynamics_curves(rows, num_layers: int):
    """Per layer: pretrained vs fine-tuned (solid) and fine-tuning seed vs seed (dashed)."""
    rows = [r for r in rows if r["metric"].split("/")[0] in dict(CURVES)]
    if not rows:
        return None
    fig = new_figure(figsize=(15, 4.2))
    axes = fig.subplots(1, len(CURVES))
    for ax, (name, label) in zip(axes, CURVES):
        for i, fraction in enumerate(fractions_of(rows)):
            for group, style, what in (("finetune", "-", "pretrained vs fine-tuned"),
                                       ("seed-vs-seed", "--", "seed vs seed")):
                mine = [r for r in rows if r["data_fraction"] == fraction and r["config"] == group
                        and r["metric"].split("/")[0] == name]
                if mine:
                    errorbar(ax, mine, lambda r: int(r["metric"].split("/")[1]), color=f"C{i}",
                              linestyle=style, marker="o", label=f"{what} ({fraction:g})")
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=max(ax.get_ylim()[0], 0.0))  # distances: an interval below 0 means nothing
        ax.set_xlabel("layer (0 = embeddings)" if name == "svcca" else "layer")
        legend(ax)
    fig.suptitle("How fine-tuning changes each layer", fontsize=10)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    return {"dynamics": dynamics_curves(rows, sweep.shape.num_layers)}


STUDY = Study(name="dynamics", Options=Options,
              summary="how fine-tuning changes each layer", title="dynamics", add_arguments=add_arguments,
              note=note, trials=trials, run=run, figures=figures, reference=reference)
