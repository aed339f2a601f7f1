"""restore: put a layer's pretrained values back into the fine-tuned model and measure what changes.

After Hao et al. (2020), "Investigating Learning Dynamics of BERT Fine-Tuning", Fig. 3: "SVCCA
distance of the last layer between the original fine-tuned model and the fine-tuned model with
parameters of a target layer replaced with their pretrained values". Protocol, per seed and data
fraction: fine-tune once; then for each layer i, a copy of the fine-tuned model with layer i's
parameters (attention, feed-forward, LayerNorms) restored to their pretrained values, and, as a
second curve, one with every layer 0..i restored (the low layers together). For each copy: the
SVCCA distance of the last layer's token representations from the fine-tuned model's, on the
seeded dev sample dynamics uses (--dynamics-examples), and its dev metrics with the fine-tuned
heads. Results (curves, index = layer i): `restore_svcca`, `restore_dev` (the headline metric:
the task's for one task, the overall score for several), and `restore_below_svcca`,
`restore_below_dev` for layers 0..i. A small distance says fine-tuning's change to layer i hardly
reaches the output.
"""
import copy
from dataclasses import dataclass
from typing import Optional

import torch

from minbert.analysis import svcca_distance, svcca_sample

from ...evaluation import evaluate
from ..arguments import positive_or_all
from ..drawing import errorbar, fractions_of, legend, new_figure
from ..study import Shape, Study, grid
from .dynamics import DYNAMICS_EXAMPLES, analysis_batches

CURVE_NAMES = ("restore_svcca", "restore_dev", "restore_below_svcca", "restore_below_dev")


def add_arguments(group):
    group.add_argument("--restore-examples", type=positive_or_all, default=DYNAMICS_EXAMPLES, metavar="N|all",
                       help="dev examples per task the last layer's SVCCA is measured on (a seeded sample, the "
                            "same for every copy) (default: %(default)s)")


@dataclass(frozen=True)
class Options:
    restore_examples: Optional[int] = DYNAMICS_EXAMPLES  # dev examples per task; None: all


def trials(config, shape: Shape) -> list:
    return grid("restore", [("restore", {"kind": "restore"})], config.seeds, config.fractions)


@torch.no_grad()
def last_layer_tokens(encoder, batches: list, seed: int = 0) -> torch.Tensor:
    """The last layer's representations of a seeded sample of the batches' real tokens (svcca_sample)."""
    was_training = encoder.training
    encoder.eval()
    try:
        states = [encoder(**seq).last_hidden_state[seq["attention_mask"].bool()].float().cpu() for seq in batches]
    finally:
        encoder.train(was_training)
    tokens = torch.cat(states)
    return tokens[torch.from_numpy(svcca_sample(len(tokens), tokens.shape[-1], seed))]


def headline(metrics: dict, tasks) -> float:
    return metrics[tasks[0]] if len(tasks) == 1 else metrics["overall"]


def run(sweep, trial) -> dict:
    result = sweep.fit(trial, sweep.inputs.encoder)
    model, tasks = result["model"], sweep.inputs.tasks
    if "analysis_batches" not in sweep.cache:
        sweep.cache["analysis_batches"] = analysis_batches(sweep.inputs, sweep.options.restore_examples)
    batches = sweep.cache["analysis_batches"]
    reference = last_layer_tokens(model.encoder, batches)
    pretrained = sweep.inputs.encoder.encoder.layer
    curves = {name: [] for name in CURVE_NAMES}
    for below in (False, True):
        prefix = "restore_below" if below else "restore"
        for i in range(sweep.shape.num_layers):
            restored = copy.deepcopy(model)
            for j in (range(i + 1) if below else (i,)):
                restored.encoder.encoder.layer[j].load_state_dict(pretrained[j].state_dict())
            tokens = last_layer_tokens(restored.encoder, batches)
            curves[f"{prefix}_svcca"].append(svcca_distance(reference, tokens))
            curves[f"{prefix}_dev"].append(headline(evaluate(restored, sweep.inputs, sweep.training.eval_batch_size),
                                                    tasks))
    result["curves"] = curves
    return result


def restore_curves(rows, num_layers: int):
    """Per restored layer i: the last layer's SVCCA distance from the fine-tuned model, and the dev score (Hao et
    al., Fig. 3); solid: layer i alone restored, dashed: layers 0..i."""
    panels = (("svcca", "SVCCA distance of the last layer from the fine-tuned model"),
              ("dev", "dev score with the fine-tuned heads"))
    rows = [r for r in rows if r["metric"].split("/")[0] in {f"restore{b}_{p}" for b in ("", "_below")
                                                            for p, _ in panels}]
    if not rows:
        return None
    fig = new_figure(figsize=(10, 4.2))
    for ax, (panel, label) in zip(fig.subplots(1, len(panels)), panels):
        for i, fraction in enumerate(fractions_of(rows)):
            for prefix, style, what in (("restore", "-", "layer i restored"), ("restore_below", "--", "layers 0..i")):
                mine = [r for r in rows if r["data_fraction"] == fraction and r["metric"].split("/")[0] ==
                        f"{prefix}_{panel}"]
                if mine:
                    errorbar(ax, mine, lambda r: int(r["metric"].split("/")[1]), color=f"C{i}", linestyle=style,
                              marker="o", label=f"{what} ({fraction:g})")
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(num_layers))
        ax.set_xlabel("restored layer i")
        legend(ax)
    fig.suptitle("Restoring pretrained layers in the fine-tuned model (Hao et al., Fig. 3)", fontsize=10)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    return {"restore": restore_curves(rows, sweep.shape.num_layers)}


STUDY = Study(name="restore", Options=Options,
              summary="restore a fine-tuned layer's pretrained values (Hao et al., Fig. 3)",
              title="restore (the last layer's SVCCA distance and the dev score after restoring layer i, or 0..i)",
              add_arguments=add_arguments, trials=trials, run=run, figures=figures)
