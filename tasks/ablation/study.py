"""What a study is: its `Study` record, its typed options, its trials.

A study (one module in studies/) declares a `Study`: its trials for a sweep (`trials(config, shape)`),
how to run one, its figures, and its own options as a frozen dataclass (`Study.Options`). Every field
of the options is in the sweep's fingerprint, so two sweeps that differ in one never share a result,
unless the field says why not: `planned(...)` (it only chooses the trials, and each trial's label
names what it chose) or `drawn(...)` (it only changes the figures). A field added without either is
fingerprinted: the safe side.

A `Trial` is one configuration at one seed and data fraction: `label` names the configuration
("from=3", "head=2:5", "layer=4,pooling=mean"; results lines keep it as "config"), `params` holds
the same as typed values for the trial itself and for the figures.
"""
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

IN_FINGERPRINT = "in_fingerprint"
AS_ARGUMENT = "as_argument"


def planned(default=None, as_argument: Optional[Callable] = None):
    """An option that only chooses the trials: the trials' labels name what it chose, so it stays out of the
    fingerprint. `as_argument(value)` writes it as ablate.py's flag value where the plain rule would not."""
    return field(default=default, metadata={IN_FINGERPRINT: False, AS_ARGUMENT: as_argument})


def drawn(default=None):
    """An option that only changes the figures: out of the fingerprint."""
    return field(default=default, metadata={IN_FINGERPRINT: False})


@dataclass(frozen=True)
class NoOptions:
    """A study without options of its own."""


def fingerprinted(options) -> dict:
    """The options that change every trial's result: all but the `planned` and `drawn` ones, by name."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)
            if f.metadata.get(IN_FINGERPRINT, True)}


def as_argument(options_type, name: str, value) -> Optional[str]:
    """An option's value as ablate.py's flag takes it ("0.03,0.25", "2:3", "5:*"); None for a flag without a
    value (a true boolean)."""
    custom = next((f.metadata.get(AS_ARGUMENT) for f in dataclasses.fields(options_type) if f.name == name),
                  None) if dataclasses.is_dataclass(options_type) else None
    if custom is not None:
        return custom(value)
    if value is True:
        return None
    if isinstance(value, (list, tuple)):
        return ",".join(_item(v) for v in value)
    return _item(value)


def _item(value) -> str:
    if isinstance(value, tuple):
        return ":".join("*" if v is None else _item(v) for v in value)
    if isinstance(value, float):  # 0.25, 1, 2e-5 (as typed: no zero-padded exponent)
        return re.sub(r"e([+-])0(\d)", r"e\1\2", f"{value:g}")
    return str(value)


@dataclass(frozen=True)
class Study:
    """One --mode, as a module in studies/ declares it."""
    name: str                     # its --mode, and its trials' mode
    summary: str                  # its part of --mode's help
    title: str                    # the title of its option group in --help
    trials: Callable              # (SweepConfig, Shape) -> [Trial]; a layer or head the model lacks: UserError
    run: Callable                 # (Sweep, Trial) -> fit's result, plus "curves" and "info" where it has them
    figures: Callable             # (Sweep, ok records, summary rows, metric) -> {plot name: Figure or None}
    Options: type = NoOptions     # its own options (a frozen dataclass); ablate.py's flags of the same names
    add_arguments: Callable = lambda group: None  # those flags (an error with any other --mode)
    note: Callable = lambda config: None  # a line worth printing before its trials run, or None
    reference: Callable = lambda sweep, params: None  # the group a configuration's paired change is measured from
    pools: Callable = lambda sweep, params: {}  # ({group: params}) -> {label: (params, [groups])}: means over configs
    trains: bool = True           # its trials fine-tune (the budget and the plateau rule apply)
    worker_unit: Callable = lambda trial: None  # trials with one value run in one worker process (sharing its cache)
    model: Callable = lambda options: None  # the model its options name (a ladder's rung 0): --model unless given


@dataclass
class Trial:
    mode: str
    label: str           # the configuration's name: "from=3", "head=2:5", "layer=4,pooling=mean", ...
    params: dict         # the same as values, for the trial itself and for the plots
    seed: int
    fraction: float
    group: str = ""      # what the summary pools over seeds; the configuration unless set
    shard_unit: str = ""  # what its shard is a hash of: trials that must run in one shard share it; its name if unset

    def __post_init__(self):
        self.group = self.group or self.label

    @property
    def name(self) -> str:
        """The trial's TensorBoard run name: folder-safe, and one per trial (the fraction in full where :g would
        round it, or two fractions would share a folder and, for dynamics, a saved model)."""
        fraction = f"{self.fraction:g}" if float(f"{self.fraction:g}") == self.fraction else repr(self.fraction)
        return re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{self.mode}-{self.label}-seed{self.seed}-frac{fraction}")

    def key(self, fingerprint: str) -> str:
        return f"{self.mode}|{self.label}|seed={self.seed}|fraction={self.fraction!r}|{fingerprint}"


@dataclass(frozen=True)
class Shape:
    num_layers: int
    num_heads: int


def grid(mode: str, configs: list, seeds, fractions) -> list:
    """Every configuration at every seed and fraction: a whole curve at the first seed comes first."""
    configs = list(dict(configs).items())  # drop repeated labels, keep the order
    return [Trial(mode, label, params, seed, fraction)
            for seed in seeds for fraction in fractions for label, params in configs]
