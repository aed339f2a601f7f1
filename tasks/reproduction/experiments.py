"""The reproduction's experiments: the ablate.py sweeps that test the papers' findings (`findings/`), at a scale.

An experiment is one or more sweeps (a study's --mode and its settings, named as ablate.py's flags name them;
sweeps.py adds the scale's budget, the seeds, model and data) and the findings whose `experiment` names it. Scales:
`cpu` (the course's data cut to small fractions: the data is cut, not the convergence) and `paper` (the papers'
schedule, for a GPU and bert-base). Layer choices are thirds of the model's depth, so any depth runs the same protocol.
"""
from dataclasses import dataclass
from typing import Callable, Optional

from minbert import UserError

from ..ablation.perturbation import thirds
from . import kept
from .arms import alone_sweep
from .follow_ups import FIRST
from .probes import ONE_LAYER, layer_to_redraw


@dataclass(frozen=True)
class Scale:
    name: str
    budget: tuple              # (name, value) settings every trial takes: the step cap, batch, evaluations
    small: float               # the scarce data fraction
    large: float               # the plentiful one
    seeds: int                 # n declared in advance (experiments may declare their own)
    expected_steps: int        # steps a trial is expected to take (the estimate's); the cap is in `budget`
    plateau: tuple = ()        # (name, value): the plateau rule's settings (stopping on held-out rows), or off
    note: str = ""


SCALES = {
    # Expected steps: a pilot (docs/measurements/2026-11-25-ablate-plateau.md, SST at 0.1, batch 32) found the
    # best held-out score at steps 300-350 and stopped at 450-500; here the patience is 3 evaluations 40 steps
    # apart, so a trial stops about 120 steps after its best: 350 expected, capped at 600.
    "cpu": Scale("cpu", (("trial_steps", 600), ("batch_size", 16), ("eval_every", 40)), 0.03, 0.25, 5, 350,
                 plateau=(("plateau_patience", 3), ("plateau_tolerance", 0.005)),
                 note="SST-5 at 0.03 (256 sentences) and 0.25 (2,136); at most 600 steps of "
                      "16, stopped on a plateau of a held-out tenth of the trial's training rows (3 evaluations "
                      "40 steps apart without a 0.005 gain); 350 steps expected"),
    "paper": Scale("paper", (("trial_steps", 0), ("epochs", 3), ("lr", 2e-5), ("batch_size", 32), ("eval_every", 0)),
                   0.1, 1.0, 5, 0,
                   plateau=(("plateau_patience", 0),),  # the fixed schedule on every training row, as the papers
                   note="the papers' schedule: 3 epochs at 2e-5, batch 32, 10% and 100% of the data (Singh & "
                        "Giovanardi's); for a GPU with --model bert-base-uncased"),
}

# Task roles: the study's own task, a second one (task dependence, datasets), the pair tasks of transfer and
# the pair-encoding tests; `--tasks ROLE=NAME,...` replaces them (with --task-file, e.g. primary=sst2,second=qnli).
ROLES = {"primary": "sst", "second": "quora", "pair": "quora", "final": "sts", "similarity": "sts"}


@dataclass(frozen=True)
class Context:
    n: int                      # the model's layers
    scale: Scale
    tasks: dict                 # role -> task name
    heads: int = 12
    model: str = "minilm"
    task_file: Optional[str] = None   # where tasks the roles name are declared (--task-file)

    @property
    def low(self) -> int:
        return thirds(self.n)[0]

    @property
    def high(self) -> int:
        return thirds(self.n)[1]


@dataclass(frozen=True)
class SweepSpec:
    label: str                 # its folder below the experiment's run, and its results file's name
    mode: str
    settings: tuple            # (name, value): the study's options, its tasks and fractions, training options


def sweep(label: str, mode: str, **settings) -> SweepSpec:
    """A sweep of --mode `mode` with `settings` named as ablate.py's flags (task, data_fractions, from_layer, ...),
    in the order its command line would give them."""
    return SweepSpec(label, mode, tuple(settings.items()))


@dataclass(frozen=True)
class Experiment:
    name: str
    what: str
    sweeps: Callable            # Context -> [SweepSpec]
    seeds: int = 0              # 0: the scale's
    needs: tuple = ()           # experiments whose results its measures read
    figures: tuple = ()         # (sweep label, plot name)
    controls: tuple = ()        # (follow-up label, (Context, kept runs) -> [SweepSpec]): a follow-up's own sweeps

    def sweeps_for(self, ctx: Context, label: str = FIRST, runs: Optional[kept.KeptRuns] = None) -> list:
        """Its sweeps, or those the follow-up `label` trains in their place (`controls`), built from the kept `runs`
        (kept.load: e.g. the probe run's best layer); UserError, one line, where they cannot be built."""
        own = dict(self.controls).get(label)
        return own(ctx, kept.KeptRuns() if runs is None else runs) if own else self.sweeps(ctx)


def every_k(ctx: Context) -> tuple:
    """--from-layer none, n-1, ..., 1, all: None is the layer count (none re-drawn), 0 all of them."""
    return (None, *range(ctx.n - 1, 0, -1), 0)


def _one(label: str, mode: str, fractions: tuple, settings=lambda ctx: {}, role: Optional[str] = "primary"):
    """One sweep: the task of `role` (None: `settings` name the tasks), `settings(ctx)`, the scale's `fractions`
    ("small", "large"), in this order (the command line run.json records)."""
    def sweeps(ctx):
        task = {"task": ctx.tasks[role]} if role else {}
        return [sweep(label, mode, **task, **settings(ctx),
                      data_fractions=tuple(getattr(ctx.scale, f) for f in fractions))]
    return sweeps


def _reinit(fraction: str):
    return _one("reinit", "reinit", (fraction,), lambda c: dict(from_layer=every_k(c)))


def _heads(layer_of):
    return _one("heads", "reinit", ("large",), lambda c: dict(heads=((layer_of(c), None),)))


def _blocks(ctx) -> dict:
    return dict(block=((0, ctx.low), (ctx.low, ctx.high - ctx.low), (ctx.high, ctx.n - ctx.high)))


def _freeze(ctx):
    out = []
    for task in (ctx.tasks["similarity"], ctx.tasks["primary"], ctx.tasks["pair"]):
        base = dict(task=task, from_layer=(None,), pair_mode="siamese", task_heads="report",
                    data_fractions=(ctx.scale.large,))
        out += [sweep(f"{task}-all", "reinit", **base), sweep(f"{task}-top", "reinit", **base, freeze_until=-ctx.low)]
    return out


def _paper_methods(ctx) -> dict:
    """Freeze Your Layers' setting for its methods: siamese pairs with its heads (its SMART and surgery runs predate
    its cross-encoding), at the large fraction."""
    return dict(pair_mode="siamese", task_heads="report", data_fractions=(ctx.scale.large,))


def _methods(ctx):
    # ablate.py --mode methods: the baseline (the options as given) and each method changing one option, paired
    # by seed; one sweep per baseline, so SMART and gradient surgery share the multitask one.
    paper = _paper_methods(ctx)
    return [sweep("multitask", "methods", task="all", **paper, methods=("smart", "dominant")),
            sweep("sts", "methods", task=ctx.tasks["similarity"], **paper, methods=("smart",))]


def _methods_alone(ctx, runs=None):
    """Follow-up smart-alone: SST alone and Quora alone (the primary and the pair task), each with and without SMART,
    paired by seed, in the paper's setting."""
    return [sweep(alone_sweep(ctx.tasks[role]), "methods", task=ctx.tasks[role], **_paper_methods(ctx),
                  methods=("smart",)) for role in ("primary", "pair")]


def _one_layer(ctx, runs):
    """Follow-up tamkin-not-necessary: at reinit-large's settings, the layer whose output is the best probe layer
    (the probe experiment's kept first run, chosen on held-out training rows) re-drawn alone, against the full model
    (the reinit study's block scheme also lists the block's complement and every layer re-drawn)."""
    layer, why = layer_to_redraw(kept.results_for(runs, FIRST), ctx)
    if layer is None:
        raise UserError(f"--follow-up tamkin-not-necessary: {why}")
    return _one(ONE_LAYER, "reinit", ("large",), lambda c: dict(block=((layer, 1),)))(ctx)


def _pairs(ctx):
    out = []
    for task in (ctx.tasks["similarity"], ctx.tasks["pair"]):
        base = dict(task=task, from_layer=(None,), data_fractions=(ctx.scale.large,))
        out += [sweep(f"{task}-cross", "reinit", **base, pair_mode="cross"),
                sweep(f"{task}-siamese", "reinit", **base, pair_mode="siamese", task_heads="report")]
    return out


EXPERIMENTS = {e.name: e for e in (
    Experiment("reinit-small", "layers >= k re-drawn then fine-tuned, every k, the primary task at the small "
               "fraction", _reinit("small"), figures=(("reinit", "reinit_layers"),)),
    Experiment("reinit-large", "the same at the large fraction", _reinit("large"),
               needs=("reinit-small",), figures=(("reinit", "reinit_layers"),),
               controls=(("tamkin-not-necessary", _one_layer),)),
    Experiment("probe", "converged linear probes of every frozen layer ([CLS] and mean), both fractions",
               _one("probe", "probe", ("small", "large")), needs=("reinit-small", "reinit-large"),
               figures=(("probe", "probe"),)),
    Experiment("permute", "the original order, 8 random orders and every layer re-drawn, 3 seeds each (seeds and "
               "orders both in the interval: a two-level crossed model)",
               _one("permute", "permute", ("large",), lambda c: dict(trials=8)), seeds=3,
               figures=(("permute", "permute"),)),
    Experiment("blocks", "a third of the layers re-drawn, or only that third kept (block preserved), against all "
               "and none re-drawn", _one("blocks", "reinit", ("large",), _blocks),
               figures=(("blocks", "reinit_blocks"),)),
    Experiment("task-dependence", "layers >= k re-drawn on the second task, k at none, two thirds, one third, all",
               _one("reinit", "reinit", ("small",), lambda c: dict(from_layer=(None, c.high, c.low, 0)), "second"),
               needs=("reinit-small",)),
    Experiment("dynamics", "per layer: weight L2, attention JS, SVCCA, pretrained vs fine-tuned and seed vs seed, "
               "both fractions", _one("dynamics", "dynamics", ("small", "large")),
               figures=(("dynamics", "dynamics"),)),
    Experiment("datasets", "fine-tunings on the primary and the second task compared per layer (Hao et al. Figs. "
               "6-7; ablate.py --across-tasks)", _one("dynamics", "dynamics", ("large",), lambda c: dict(
                   tasks=f"{c.tasks['primary']},{c.tasks['second']}", across_tasks=True), None)),
    Experiment("restore", "each layer of the fine-tuned model restored to its pretrained values, the last "
               "layer's SVCCA distance (Hao et al. Fig. 3; ablate.py --mode restore)",
               _one("restore", "restore", ("large",))),
    Experiment("freeze", "the top third trained (the rest frozen) against every layer, siamese pairs with the "
               "paper's heads, on STS, SST and Quora", _freeze),
    Experiment("methods", "SMART and gradient surgery (dominant task) each against the same training without "
               "it, paired by seed: multitask, and STS alone for SMART; siamese pairs with the paper's heads",
               _methods, controls=(("smart-alone", _methods_alone),)),
    Experiment("pairs", "pairs cross-encoded against each sentence encoded alone, STS and Quora", _pairs),
    # ablate.py lists transfer's direct arm at twice the cap (via=none,final=B,steps=x2) beside the usual one: the
    # transfer arm's total steps; the measure compares with it when the results have it.
    Experiment("transfer", "the pair tasks each fine-tuned directly (at its own cap and at twice it: the "
               "transfer arm's total) and after the other", _one("transfer", "transfer", ("small",), lambda c: dict(
                   tasks=f"{c.tasks['pair']},{c.tasks['final']}"), None), figures=(("transfer", "transfer"),)),
    Experiment("heads-top", "each head of the top layer re-drawn, 3 seeds (the seed is the unit)",
               _heads(lambda c: c.n - 1), seeds=3, figures=(("heads", "reinit_heads_by_layer"),)),
    Experiment("heads-bottom", "each head of the bottom layer re-drawn, 3 seeds (the seed is the unit)",
               _heads(lambda c: 0), seeds=3, figures=(("heads", "reinit_heads_by_layer"),)),
)}


def selected(names) -> list:
    """The experiments named (all when None), with those their measures read, in declaration order."""
    wanted = set(names or EXPERIMENTS)
    for name in list(wanted):
        wanted.update(EXPERIMENTS[name].needs)
    return [e for e in EXPERIMENTS.values() if e.name in wanted]


def seeds_of(experiment: Experiment, scale: Scale) -> list:
    """The seeds an experiment's sweeps run: its own count, else the scale's (the one place both are read)."""
    return list(range(experiment.seeds or scale.seeds))
