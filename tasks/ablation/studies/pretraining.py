"""pretraining: fine-tune each rung of a ladder of MLM-pretrained models, and read the score against pretraining tokens.

Pretraining itself is the varied quantity. `pretrain.py --save-at 0 2M 5M ... --out RUN` writes the
ladder: RUN/model-at-<tokens>/ (model-at-0: the same architecture, its weights as drawn, before the
first step) and RUN/model/ (the final weights), each with pretraining.json saying how many tokens made
it. Protocol: every rung (`--ladder RUN`: each model-at-*/ and model/, ordered by their tokens, a token
count found twice in one run kept once; and/or `--rungs DIR,...`) is fine-tuned at every seed and data fraction,
with the same seeds, budget and options; a trial loads its rung's encoder (the heads are drawn by the
trial's seed, as always, and so is the pooler that a BertForMaskedLM folder lacks, the same at every rung).
The reference is the smallest rung (tokens=0, the untrained model, where the ladder has it): each rung's
change is paired by seed (the rung minus the untrained model at the same seed), so with a small and a
large --data-fractions it asks Singh & Giovanardi's "pre-training helps when data is scarce" and Tamkin
et al.'s data-size question where the pretraining is what changes. Without --model the sweep's model
(its tokenizer, its shape) is the least-pretrained rung; every rung must share its architecture and
vocabulary. A rung's configuration is named by its tokens and its weights' SHA-256
("tokens=2001365,weights=7948f76d6e4a"), so a rung pretrained again is never read from the old one's
results, and a rung added to a growing ladder leaves the others' results standing.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

import minbert
from minbert import UserError
from minbert.loading import sha256_of

from ...saved.model_folder import MODEL_DIR, Pretraining, read_pretraining
from ...saved.model_folder import PRETRAINING_JSON as INFO_FILE
from ..arguments import items
from ..drawing import errorbar, fractions_of, legend, metric_axis, new_figure, pretty, title
from ..study import Shape, Study, grid, planned

LADDER_PREFIX = "model-at-"
WEIGHTS = "model.safetensors"
ARCHITECTURE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size", "hidden_act")
VOCABULARY = "vocab.txt"


def add_arguments(group):
    group.add_argument("--ladder", default=None, metavar="RUN_DIR",
                       help="a pretrain.py run folder: its model-at-<tokens>/ folders (--save-at) and model/ are "
                            "the rungs, ordered by their tokens (pretraining.json)")
    group.add_argument("--rungs", type=items, default=None, metavar="DIR,...",
                       help="model folders written by pretrain.py (each with pretraining.json), as rungs beside "
                            "or instead of --ladder's")


@dataclass(frozen=True)
class Options:
    ladder: Optional[str] = planned()   # paths: they choose the trials, whose labels name each rung's tokens and
    rungs: Optional[tuple] = planned()  # weights (SHA-256), so the paths stay out of the fingerprint


@dataclass(frozen=True)
class Rung:
    tokens: int
    step: Optional[int]
    folder: str

    @property
    def label(self) -> str:
        """Its configuration's name: its tokens, and its weights (a rung pretrained again is another one)."""
        return f"tokens={self.tokens},weights={weights_sha256(self.folder)[:12]}"


def ladder_rungs(options) -> list:
    """The rungs --ladder and --rungs name, ordered by tokens; a folder that is not a pretrain.py model, or rungs
    of two architectures or vocabularies: UserError, before anything is loaded."""
    if not options.ladder and not options.rungs:
        raise UserError("--mode pretraining needs --ladder RUN_DIR (a pretrain.py run with --save-at) or --rungs "
                        "DIR,...")
    found = [read_rung(f, "--ladder") for f in ladder_folders(options.ladder)] if options.ladder else []
    found += [read_rung(Path(f), "--rungs") for f in options.rungs or ()]
    rungs = {}
    for rung in sorted(found, key=lambda r: r.tokens):
        kept = rungs.setdefault(rung.tokens, rung)
        if kept is not rung and not same_run(kept, rung):
            raise UserError(f"--rungs: {kept.folder} and {rung.folder} both have {rung.tokens:,} tokens (a rung is "
                            f"named by its tokens): give one of them")
    rungs = list(rungs.values())
    check_architecture(rungs)
    return rungs


def ladder_folders(ladder: str) -> list:
    root = Path(ladder).expanduser()
    if not root.is_dir():
        raise UserError(f"--ladder {ladder}: no such folder")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(LADDER_PREFIX))
    folders += [root / MODEL_DIR] if (root / MODEL_DIR).is_dir() else []
    if not folders:
        raise UserError(f"--ladder {ladder}: no {LADDER_PREFIX}<tokens>/ or {MODEL_DIR}/ folder (a pretrain.py run "
                        f"folder, with --save-at for a ladder)")
    return folders


def read_rung(folder: Path, flag: str) -> Rung:
    folder = folder.expanduser().resolve()
    for name in (INFO_FILE, "config.json", WEIGHTS):
        if not (folder / name).is_file():
            raise UserError(f"{flag}: {folder} has no {name} (not a finished pretrain.py model folder)")
    try:
        json.loads((folder / "config.json").read_text(encoding="utf-8"))
        info = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
        tokens, made = int(info["tokens"]), Pretraining.from_json(info)
    except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        raise UserError(f"{flag}: {folder}: config.json or {INFO_FILE} unreadable, or no tokens in it "
                        f"({type(e).__name__}: {e})") from None
    return Rung(tokens, made.step, str(folder))


def same_run(a: Rung, b: Rung) -> bool:
    """Two folders of one token count: one rung when they hold the same weights (model/ is also the last
    model-at-N when the run ended at that budget's step)."""
    return Path(a.folder).parent == Path(b.folder).parent or weights_sha256(a.folder) == weights_sha256(b.folder)


def architecture(folder: str) -> dict:
    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    vocabulary = Path(folder) / VOCABULARY
    return {**{k: config.get(k) for k in ARCHITECTURE},
            "vocabulary": sha256_of(vocabulary) if vocabulary.is_file() else None}


def check_architecture(rungs: list, model_folder: Optional[str] = None, what: str = "--model") -> None:
    """Every rung (and the sweep's model, which gives the tokenizer and the shape) of one architecture and
    vocabulary: the trials differ in their pretraining alone."""
    first = architecture(rungs[0].folder)
    others = [(r.folder, "rung") for r in rungs[1:]] + ([(model_folder, what)] if model_folder else [])
    for folder, kind in others:
        theirs = architecture(folder)
        differ = [k for k in first if first[k] != theirs[k]]
        if differ:
            k = differ[0]
            raise UserError(f"--mode pretraining: {kind} {folder} has {k} {theirs[k]}, the rung {rungs[0].folder} "
                            f"{first[k]}: every rung must share one architecture and vocabulary")


_HASHES = {}  # (path, size, mtime) -> SHA-256: a rung's weights are hashed once per process


def weights_sha256(folder: str) -> str:
    path = Path(folder) / WEIGHTS
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_of(path)
    return _HASHES[key]


def first_rung(options) -> str:
    """The sweep's --model unless given: the least-pretrained rung, for its tokenizer and shape (every rung shares
    them). Not the last: a ladder still being pretrained gains rungs, and the sweep's fingerprint (which holds
    --model's weights) stays put while they are added."""
    return ladder_rungs(options)[0].folder


def trials(config, shape: Shape) -> list:
    """Every rung at every seed and fraction, labelled by its tokens and weights: a rung pretrained again is a
    new configuration, and one added later leaves the others' results standing."""
    rungs = ladder_rungs(config.options)
    model = config.training.model
    folder, _ = minbert.resolve(model, fallback_to_embedded=model == minbert.DEFAULT_MODEL)
    check_architecture(rungs, str(folder), f"--model {model}")
    configs = [(r.label, {"tokens": r.tokens, "folder": r.folder, "weights": weights_sha256(r.folder)})
               for r in rungs]
    return grid("pretraining", configs, config.seeds, config.fractions)


def rung_encoder(sweep, folder: str, seed: int) -> minbert.BertModel:
    """The rung's encoder, loaded for each trial (a small cost beside its fine-tuning; the plan runs the rungs in
    turn at each seed). The pooler a masked-LM folder lacks is drawn under the trial's seed, so that it is the same
    at every rung, and the process's random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return minbert.from_pretrained(folder, implementation=sweep.inputs.encoder.config.implementation)


def run(sweep, trial) -> dict:
    encoder = rung_encoder(sweep, trial.params["folder"], trial.seed)
    if encoder.source.weights_sha256 != trial.params["weights"]:
        raise UserError(f"{trial.params['folder']}: its weights changed since the sweep was planned (pretrained "
                        f"again?): rerun the same command to plan the sweep anew")
    result = sweep.fit(trial, encoder)
    # read_rung held it to be there when the sweep was planned
    info = read_pretraining(trial.params["folder"]) or Pretraining()
    # what the trial started from, beside the file's hash in its params (the tests hold it to the rung's file)
    embeddings = float(encoder.embeddings.word_embeddings.weight.detach().double().sum())
    result["info"] = {"rung": {"tokens": trial.params["tokens"], "step": info.step,
                               "word_embeddings_sum": embeddings, "held_out": info.held_out}}
    return result


def reference(sweep, params) -> Optional[str]:
    """The least-pretrained rung (tokens=0 where the ladder has it): each rung's change is paired by seed."""
    if "reference" not in sweep.cache:
        least = ladder_rungs(sweep.options)[0]
        sweep.cache["reference"] = (least.label, weights_sha256(least.folder))
    label, weights = sweep.cache["reference"]
    return None if params["weights"] == weights else label


def tokens_text(n: int) -> str:
    """2000000 -> 2M, 1500 -> 1.5k."""
    for scale, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(n)


def tokens_axis(ax, rows):
    """Pretraining tokens on a symmetric log axis: 0 (the untrained rung) at the left, the budgets spread out."""
    ticks = sorted({r["params"]["tokens"] for r in rows})
    positive = [t for t in ticks if t > 0]
    if positive:
        ax.set_xscale("symlog", linthresh=min(positive), linscale=0.5)
    ax.set_xticks(ticks)
    ax.set_xticklabels([tokens_text(t) for t in ticks], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("pretraining tokens (symmetric log scale; 0 = untrained)")


def tokens_curve(rows, metric: str, value: str = "mean"):
    """Per data fraction, against pretraining tokens: the metric (value "mean": mean over seeds, 95% interval),
    or each rung's change from the least-pretrained one, paired by seed ("change_mean")."""
    rows = [r for r in rows if r["metric"] == metric and "tokens" in r["params"]]
    drawn = [r for r in rows if r[value] is not None]
    if not drawn:
        return None
    fig = new_figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    fractions = fractions_of(drawn)
    for i, fraction in enumerate(fractions):
        dodge = 1.04 ** (i - (len(fractions) - 1) / 2)  # the fractions' bars side by side, not on each other
        errorbar(ax, [r for r in drawn if r["data_fraction"] == fraction], lambda r: r["params"]["tokens"] * dodge,
                 value=value, color=f"C{i}", marker="o", label=f"data fraction {fraction:g}")
    tokens_axis(ax, rows)
    if value == "mean":
        metric_axis(ax, metric)
        text = "Fine-tuning score against pretraining tokens"
    else:
        reference = drawn[0]["reference"].split(",")[0]  # tokens=0, without its weights' hash
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_ylabel(f"change in {pretty(metric)} from {reference} (paired by seed)")
        text = f"What pretraining adds to fine-tuning: each rung minus {reference}, same seeds"
    legend(ax)
    title(fig, text, drawn)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    """The rungs as they are now: rows of a rung since pretrained again stay in summary.csv, under their label."""
    current = {r.label for r in ladder_rungs(sweep.options)}
    rows = [r for r in rows if r["config"] in current]
    return {"pretraining": tokens_curve(rows, metric), "pretraining_change": tokens_curve(rows, metric, "change_mean")}


STUDY = Study(name="pretraining", Options=Options,
              summary="fine-tune each rung of a pretraining ladder: score against pretraining tokens",
              title="pretraining (rungs: pretrain.py model folders; compared with the least-pretrained, by seed)",
              add_arguments=add_arguments, trials=trials, run=run, figures=figures, reference=reference,
              model=first_rung)
