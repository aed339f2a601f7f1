"""The reproduction report: for each paper behind ablate.py, the cheapest experiment that tests its headline
direction, run as the same sweeps a user runs, and a markdown report with a verdict per finding.

An experiment is one or more sweeps (a study's --mode and its options, the scale below added) and the
findings it tests. A finding is a direction ("x is below y", "x grows toward the top layers") turned into
one number per seed, or per pair of seeds, whose 95% interval decides: reproduced when the interval lies on
the paper's side of zero, not reproduced when it lies on the other side, inconclusive when it holds zero.
A finding of "no loss" is an equivalence test instead: reproduced when the interval lies within
-/+ its margin, not reproduced when it lies wholly outside it.

Scaled down so that each experiment takes 5-25 minutes on a 2-core CPU (fp32; docs/reproduction/README.md:
wall time): the embedded 6-layer model, SST-5 (STS for the freezing study), `STEPS` optimizer steps of
batch `BATCH` per trial (the
budget rule of every sweep: the same steps at every data fraction), dev evaluated once, after the last
step, and the layer choices below in thirds and halves of the model, so a 12-layer model runs the same
protocol.
"""
import dataclasses
import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..fileio import atomic_write_text, safe_join
from .statistics import interval, paired_interval, pairwise_interval
from .summary import trial_metrics

STEPS = 120
BATCH = 16
SMALL, LARGE = 0.03, 0.25   # SST: 256 and 2,136 sentences; 120 steps of 16 are 7.5 passes and 0.9 of one
SEEDS = (0, 1, 2)
SCALE = ("--trial-steps", str(STEPS), "--batch-size", str(BATCH), "--eval-every", str(STEPS))
FREEZE_MARGIN = 0.02        # "no loss" from freezing: within 0.02 Pearson of fine-tuning every layer

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"


# ---------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class SweepSpec:
    label: str       # its folder below the experiment's
    mode: str
    options: tuple   # the study's options; the scale, seeds, model and data options are added


@dataclass(frozen=True)
class Experiment:
    name: str
    what: str                    # what is run, in one sentence, for the report
    sweeps: Callable             # (num_layers, the report's folder) -> [SweepSpec]
    findings: Callable           # (Results, num_layers) -> [Finding]
    figures: tuple = ()          # (sweep label, plot name) to show
    needs: tuple = ()            # experiments whose results its findings read


@dataclass
class Finding:
    paper: str
    claim: str                   # the paper's finding, as tested here
    measured: str                # what the number is
    estimate: Optional[dict]     # statistics.interval's result, or None when it could not be measured
    outcome: str = ""
    rule: str = "> 0"            # "> 0", "< 0", or "|x| < margin"
    margin: float = 0.0

    def __post_init__(self):
        self.outcome = self.outcome or decide(self.estimate, self.rule, self.margin)


def decide(estimate: Optional[dict], rule: str, margin: float = 0.0) -> str:
    """The verdict of a 95% interval under the finding's rule."""
    if not estimate or estimate.get("ci95_low") is None:
        return INCONCLUSIVE
    low, high = estimate["ci95_low"], estimate["ci95_high"]
    if rule == "> 0":
        return REPRODUCED if low > 0 else NOT_REPRODUCED if high < 0 else INCONCLUSIVE
    if rule == "< 0":
        return REPRODUCED if high < 0 else NOT_REPRODUCED if low > 0 else INCONCLUSIVE
    if rule == "|x| < margin":
        return REPRODUCED if -margin < low and high < margin else \
            NOT_REPRODUCED if low >= margin or high <= -margin else INCONCLUSIVE
    raise ValueError(rule)


# ---------------------------------------------------------------------------- reading results


class Results:
    """The finished trials of every sweep run, by (experiment, sweep label)."""

    def __init__(self):
        self.records = {}

    def add(self, experiment: str, label: str, records: list):
        self.records[(experiment, label)] = records

    def values(self, experiment: str, label: str, metric: str, config: Optional[str] = None,
               fraction: Optional[float] = None) -> dict:
        """{seed (or pair of seeds): value} of `metric` over the sweep's trials of that configuration (or group)
        and data fraction."""
        out = {}
        for r in self.records.get((experiment, label), ()):
            if (config is None or config in (r["config"], r["group"])) and \
                    (fraction is None or r["data_fraction"] == fraction):
                value = trial_metrics(r).get(metric)
                if value is not None:
                    out[tuple(r["params"]["seeds"]) if "seeds" in r["params"] else r["seed"]] = value
        return out

    def configs(self, experiment: str, label: str, test=lambda params: True) -> list:
        return sorted({r["config"] for r in self.records.get((experiment, label), ()) if test(r["params"])})


def combine(function, *series: dict) -> dict:
    """function(a, b, ...) per seed, over the seeds every series has."""
    common = set(series[0]).intersection(*series[1:]) if series else set()
    return {s: function(*(x[s] for x in series)) for s in sorted(common)}


def estimate(values: dict) -> Optional[dict]:
    """The 95% interval of per-seed values (seeds independent) or per-pair values (the jackknife)."""
    if not values:
        return None
    if isinstance(next(iter(values)), tuple):
        return pairwise_interval(values)
    return interval(values.values())


def mean_over(series: list) -> dict:
    """Per seed, the mean of {seed: value} series (layers, random orders)."""
    return combine(lambda *v: float(np.mean(v)), *series) if series else {}


# ---------------------------------------------------------------------------- the experiments


def thirds(n: int) -> tuple:
    """k for "layers >= k re-drawn" at a third and two thirds of the depth (2 and 4 of 6; 4 and 8 of 12)."""
    return max(1, round(n / 3)), max(2, round(2 * n / 3))


def fractions_option(*fractions) -> tuple:
    return ("--data-fractions", ",".join(f"{f:g}" for f in fractions))


def _reinit_sweeps(n, root):
    low, high = thirds(n)
    return [SweepSpec("reinit", "reinit", ("--task", "sst", "--from-layer", f"none,{high},{low},all",
                                           *fractions_option(SMALL, LARGE)))]


def _reinit_findings(results: Results, n: int) -> list:
    low, high = thirds(n)
    name, out = "tamkin-reinit", []

    def score(k, fraction):
        return results.values(name, "reinit", "dev/sst", f"from={k}", fraction)

    for fraction in (SMALL, LARGE):
        pre, none_pretrained = score(n, fraction), score(0, fraction)
        out.append(Finding(
            "Tamkin et al. 2020", f"with every layer re-drawn, fine-tuning ends below the pretrained model (fraction "
            f"{fraction:g})",
            "SST accuracy, every layer re-drawn minus pretrained (paired by seed)",
            paired_interval(none_pretrained, pre), rule="< 0"))
        bottom = combine(lambda a, b: a - b, score(low, fraction), none_pretrained)   # layers 0..low-1 pretrained
        top = combine(lambda a, b: a - b, pre, score(high, fraction))                # layers high..n-1 pretrained
        out.append(Finding(
            "Tamkin et al. 2020", f"lower layers contribute more than upper ones (fraction {fraction:g})",
            f"gain from pretrained layers 0..{low - 1} (k={low} minus k=0) minus gain from pretrained layers "
            f"{high}..{n - 1} (k={n} minus k={high})", estimate(combine(lambda a, b: a - b, bottom, top))))
    upper = {f: combine(lambda a, b: a - b, score(n, f), score(low, f)) for f in (SMALL, LARGE)}
    out.append(Finding(
        "Tamkin et al. 2020", "pretrained upper layers help more when fine-tuning data is plentiful",
        f"gain from pretrained layers {low}..{n - 1} (k={n} minus k={low}) at fraction {LARGE:g} minus at "
        f"{SMALL:g} (per seed)", estimate(combine(lambda a, b: a - b, upper[LARGE], upper[SMALL]))))
    return out


def _permute_sweeps(n, root):
    return [SweepSpec("permute", "permute", ("--task", "sst", "--trials", "4", *fractions_option(LARGE)))]


def _permute_findings(results: Results, n: int) -> list:
    name = "tamkin-permute"
    shuffled = [results.values(name, "permute", "dev/sst", c)
                for c in results.configs(name, "permute", lambda p: p.get("random"))]
    mean_shuffled = mean_over(shuffled)
    original = results.values(name, "permute", "dev/sst", "order=" + "-".join(map(str, range(n))))
    redrawn = results.values(name, "permute", "dev/sst", "reinit=all")
    return [
        Finding("Tamkin et al. 2020", "a shuffled layer order loses accuracy against the original order",
                f"SST accuracy, mean over {len(shuffled)} random orders minus the original order (paired by seed)",
                paired_interval(mean_shuffled, original), rule="< 0"),
        Finding("Tamkin et al. 2020", "a shuffled pretrained model still beats one with every layer re-drawn",
                f"SST accuracy, mean over {len(shuffled)} random orders minus every layer re-drawn (paired by seed)",
                paired_interval(mean_shuffled, redrawn)),
    ]


def _probe_sweeps(n, root):
    return [SweepSpec("probe", "probe", ("--task", "sst", *fractions_option(SMALL, LARGE),
                                         "--reinit-sweep", str(Path(root) / "tamkin-reinit" / "reinit")))]


def _probe_findings(results: Results, n: int) -> list:
    low, _ = thirds(n)
    name, out = "tamkin-probe", []
    for fraction in (SMALL, LARGE):
        def probe(layer, pooling):
            return results.values(name, "probe", "dev/sst", f"layer={layer},pooling={pooling}", fraction)
        candidates = [(layer, pooling) for layer in range(n + 1) for pooling in ("mean", "cls-token")
                      if probe(layer, pooling)]
        finetuned = {k: results.values("tamkin-reinit", "reinit", "dev/sst", f"from={k}", fraction)
                     for k in (0, low, n)}
        if not candidates:
            best_pooling, best_layer, best = "mean", n, {}
        else:
            best_layer, best_pooling = max(candidates, key=lambda c: np.mean(list(probe(*c).values())))
            best = probe(best_layer, best_pooling)
        out.append(Finding(
            "Tamkin et al. 2020", f"a linear probe of the frozen model stays below fine-tuning (fraction {fraction:g})",
            f"SST accuracy, the best probe (layer {best_layer}, {best_pooling} pooling, chosen by its mean) minus "
            f"the fine-tuned pretrained model (paired by seed)", paired_interval(best, finetuned[n]), rule="< 0"))
        # Both curves start from the pretrained embeddings alone (fine-tuning: every layer re-drawn; probing:
        # layer 0, the embeddings' output) and end at their best (fine-tuning: nothing re-drawn; probing: its
        # best layer, which need not be the top one).

        def share(value, floor, ceiling):
            return (value - floor) / (ceiling - floor) if abs(ceiling - floor) > 1e-9 else math.nan

        ft_share = combine(share, finetuned[low], finetuned[0], finetuned[n])
        probe_share = combine(share, probe(low, best_pooling), probe(0, best_pooling), best)
        difference = {s: v for s, v in combine(lambda a, b: a - b, ft_share, probe_share).items() if math.isfinite(v)}
        out.append(Finding(
            "Tamkin et al. 2020", f"probing needs more pretrained layers than fine-tuning does (fraction {fraction:g})",
            f"share of the gain over the embeddings alone reached with layers 0..{low - 1}: fine-tuning (k={low} "
            f"between k=0 and k={n}) minus probing (layer {low} between layer 0 and layer {best_layer}, per seed)",
            estimate(difference)))
    return out


def _dynamics_sweeps(n, root):
    return [SweepSpec("dynamics", "dynamics", ("--task", "sst", *fractions_option(LARGE)))]


def _dynamics_findings(results: Results, n: int) -> list:
    name = "hao-dynamics"
    bottom, top = range(0, n // 2), range(n // 2, n)

    def top_minus_bottom(metric: str, config: str, offset: int = 0) -> Optional[dict]:
        """Per seed (or pair), the mean over the top half of the layers minus over the bottom half; `offset` 1
        for curves whose index 0 is the embeddings' output."""
        series = [results.values(name, "dynamics", f"{metric}/{i + offset}", config) for i in range(n)]
        if not all(series):
            return None
        return estimate(combine(lambda a, b: a - b, mean_over([series[i] for i in top]),
                                 mean_over([series[i] for i in bottom])))

    halves = f"mean over layers {top[0]}..{top[-1]} minus over layers 0..{bottom[-1]}"
    return [
        Finding("Singh & Giovanardi", "fine-tuning moves the upper layers' weights more than the lower ones'",
                f"L2 distance of the output sub-layer's dense weight, pretrained vs fine-tuned: {halves}",
                top_minus_bottom("weight_l2", "finetune")),
        Finding("Hao et al. 2020", "fine-tuning changes the upper layers' attention most",
                f"attention JS divergence, pretrained vs fine-tuned (per sentence): {halves}",
                top_minus_bottom("attention_js", "finetune")),
        Finding("Hao et al. 2020", "fine-tuning changes the upper layers' representations most",
                f"SVCCA distance, pretrained vs fine-tuned: {halves}",
                top_minus_bottom("svcca", "finetune", offset=1)),
        Finding("Hao et al. 2020", "fine-tunings from different seeds agree in the lower layers, differ in the upper",
                f"SVCCA distance between two seeds' fine-tunings: {halves} (pairs of seeds; jackknife interval)",
                top_minus_bottom("svcca", "seed-vs-seed", offset=1)),
    ]


def _freeze_sweeps(n, root):
    # The report's protocol: each sentence encoded alone, its STS head 5 * relu(cos(W1 u, W2 v)).
    base = ("--task", "sts", "--from-layer", "none", "--pair-mode", "siamese", "--task-heads", "report",
            *fractions_option(LARGE))
    low, _ = thirds(n)
    return [SweepSpec("all-layers", "reinit", base),
            SweepSpec("top-layers", "reinit", (*base, "--freeze-until", f"-{low}")),
            SweepSpec("heads-only", "reinit", (*base, "--freeze-until", "all"))]


def _freeze_findings(results: Results, n: int) -> list:
    name = "freeze-your-layers"
    low, _ = thirds(n)
    pearson = {label: results.values(name, label, "dev/sts", f"from={n}")
               for label in ("all-layers", "top-layers", "heads-only")}
    return [
        Finding("Freeze Your Layers (CS224N)", "training only the top layers loses little on STS",
                f"STS Pearson, only the top {low} layers (and heads) trained minus every layer trained (paired by "
                f"seed; margin {FREEZE_MARGIN})", paired_interval(pearson["top-layers"], pearson["all-layers"]),
                rule="|x| < margin", margin=FREEZE_MARGIN),
        Finding("Freeze Your Layers (CS224N)", "the trained top layers matter: a frozen encoder does worse",
                f"STS Pearson, only the top {low} layers trained minus only the heads trained (paired by seed)",
                paired_interval(pearson["top-layers"], pearson["heads-only"])),
    ]


def _transfer_sweeps(n, root):
    return [SweepSpec("transfer", "transfer", ("--tasks", "quora,sts", *fractions_option(SMALL)))]


def _transfer_findings(results: Results, n: int) -> list:
    name = "bert-goes-to-college"
    direct = results.values(name, "transfer", "dev/sts", "via=none,final=sts")
    via = results.values(name, "transfer", "dev/sts", "via=quora,final=sts")
    return [Finding("BERT Goes to College", "an intermediate task helps a related final task when its data is scarce",
                    f"STS Pearson at fraction {SMALL:g}, fine-tuned on Quora first minus directly (paired by seed)",
                    paired_interval(via, direct))]


EXPERIMENTS = {e.name: e for e in (
    Experiment("tamkin-reinit",
               "SST: layers >= k re-drawn (BERT's init), then fine-tuned, k at none, two thirds, one third and all "
               "of the depth, at two data fractions", _reinit_sweeps, _reinit_findings,
               figures=(("reinit", "reinit_layers"),)),
    Experiment("tamkin-permute",
               "SST: the original layer order, 4 random orders and every layer re-drawn, each fine-tuned",
               _permute_sweeps, _permute_findings, figures=(("permute", "permute"),)),
    Experiment("tamkin-probe",
               "SST: converged linear probes of every layer of the frozen model ([CLS] and mean pooling), against "
               "the tamkin-reinit fine-tuning curve", _probe_sweeps, _probe_findings,
               figures=(("probe", "probe"),), needs=("tamkin-reinit",)),
    Experiment("hao-dynamics",
               "SST: per layer, weight change, attention JS and SVCCA, pretrained vs fine-tuned and seed vs seed",
               _dynamics_sweeps, _dynamics_findings, figures=(("dynamics", "dynamics"),)),
    Experiment("freeze-your-layers",
               "STS with the report's heads (each sentence encoded alone, 5 * relu(cos(W1 u, W2 v)), mean "
               "pooling): every layer fine-tuned, only the top third (embeddings and lower layers frozen), and only "
               "the heads (the encoder frozen)", _freeze_sweeps, _freeze_findings),
    Experiment("bert-goes-to-college",
               "Quora and STS: each fine-tuned directly and after the other (intermediate-task transfer)",
               _transfer_sweeps, _transfer_findings, figures=(("transfer", "transfer"),)),
)}


def selected(names) -> list:
    """The experiments named (all when None), with those their findings read, in declaration order."""
    wanted = set(names or EXPERIMENTS)
    for name in list(wanted):
        wanted.update(EXPERIMENTS[name].needs)
    return [e for e in EXPERIMENTS.values() if e.name in wanted]


# ---------------------------------------------------------------------------- running and reporting


@dataclass
class Ran:
    """What one sweep of an experiment took."""
    experiment: str
    label: str
    trials: int
    seconds: float                 # the trials' own wall time, summed over every run that made them
    status: int
    folder: Path


def sweep_argv(spec: SweepSpec, folder: Path, common: list) -> list:
    return ["--mode", spec.mode, *spec.options, *SCALE, "--out", str(folder), *common]


def run_experiment(experiment: Experiment, num_layers: int, root: Path, common: list, run_sweep,
                   results: Results) -> list:
    """Run (or resume) each of the experiment's sweeps, `run_sweep(argv)` -> (exit status, finished records),
    adding their records to `results`; what each took."""
    ran = []
    folder = safe_join(root, experiment.name)
    for spec in experiment.sweeps(num_layers, root):
        out = folder / spec.label
        status, records = run_sweep(sweep_argv(spec, out, common))
        results.add(experiment.name, spec.label, records)
        ran.append(Ran(experiment.name, spec.label, len(records), sum(r.get("wall_time_s", 0) for r in records),
                       status, out))
    return ran


def write_report(root: Path, experiments: list, results: Results, num_layers: int, ran: list, context: dict) -> Path:
    """report.md (and report.json) in `root`, the figures copied beside it into figures/."""
    findings = {e.name: e.findings(results, num_layers) for e in experiments}
    records = [r for rs in results.records.values() for r in rs]
    context = {**context, "precision": "/".join(sorted({r.get("precision", "?") for r in records})) or "?",
               "device": "/".join(sorted({r.get("device", "?") for r in records})) or "?"}
    figures_dir = root / "figures"
    lines = ["# Reproduction report", "",
             f"Model {context['model']} ({num_layers} layers), data {context['data_dir']}, seeds "
             f"{context['seeds']}, {context['precision']} on {context['device']} ({context['cpu']}, "
             f"{context.get('threads', '?')} thread(s) per process). "
             f"Each trial: {STEPS} optimizer steps of batch {BATCH}, whatever its data fraction; its result is the "
             f"dev evaluation after the last step. Intervals are 95% t-intervals over seeds (paired by seed where "
             f"two configurations are compared; a jackknife over seeds for seed-vs-seed pairs). Verdict: "
             f"reproduced when the interval lies on the paper's side of zero, not reproduced when on the other, "
             f"inconclusive when it holds zero (for 'loses little': within -/+ the margin).", "",
             "| paper | finding | measured | mean [95% CI] | n | verdict |", "|---|---|---|---|---|---|"]
    for e in experiments:
        for f in findings[e.name]:
            lines.append(f"| {f.paper} | {f.claim} | {f.measured} | {format_estimate(f.estimate)} | "
                         f"{(f.estimate or {}).get('n', 0)} | **{f.outcome}** |")
    lines += ["", "## Experiments", ""]
    for e in experiments:
        spent = [r for r in ran if r.experiment == e.name]
        minutes = sum(r.seconds for r in spent) / 60
        lines += [f"### {e.name}", "", e.what + ".", "",
                  "Sweeps: " + "; ".join(f"`{_relative(r.folder, root)}/` ({r.trials} trials)" for r in spent) +
                  f". Trial time {minutes:.1f} min.", ""]
        for label, plot in e.figures:
            source = next((r.folder for r in spent if r.label == label), None)
            png = source / "plots" / f"{plot}.png" if source else None
            if png and png.exists():
                figures_dir.mkdir(parents=True, exist_ok=True)
                target = figures_dir / f"{e.name}-{plot}.png"
                shutil.copyfile(png, target)
                lines += [f"![{e.name}: {plot}](figures/{target.name})", ""]
        for f in findings[e.name]:
            lines.append(f"- {f.paper}: {f.claim}: {format_estimate(f.estimate)} ({f.measured}) -> **{f.outcome}**")
        lines.append("")
    path = root / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    atomic_write_text(root / "report.json", json.dumps(
        {"context": context, "scale": {"steps": STEPS, "batch": BATCH, "fractions": [SMALL, LARGE]},
         "findings": {name: [dataclasses.asdict(f) for f in fs] for name, fs in findings.items()},
         "sweeps": [{**dataclasses.asdict(r), "folder": str(r.folder)} for r in ran]}, indent=1, default=str))
    return path


def _relative(folder: Path, root: Path) -> str:
    """The sweep's folder as the report names it: relative to the report, so the report can be moved with them."""
    try:
        return Path(folder).relative_to(root).as_posix()
    except ValueError:
        return str(folder)


def format_estimate(e: Optional[dict]) -> str:
    if not e:
        return "not measured"
    if e.get("ci95_low") is None:
        return f"{e['mean']:+.4f} [no interval]"
    return f"{e['mean']:+.4f} [{e['ci95_low']:+.4f}, {e['ci95_high']:+.4f}]"


def run(names, root: Path, common: list, num_layers: int, run_sweep, context: dict) -> tuple:
    """Run the experiments named (and those they need), then write the report: (report path, whether a sweep
    had failed trials)."""
    experiments = selected(names)
    results, ran = Results(), []
    for e in experiments:
        started = time.time()
        print(f"reproduce: {e.name}: {e.what}", flush=True)
        ran += run_experiment(e, num_layers, root, common, run_sweep, results)
        print(f"reproduce: {e.name} done in {(time.time() - started) / 60:.1f} min", flush=True)
    path = write_report(root, experiments, results, num_layers, ran, context)
    return path, any(r.status for r in ran)
