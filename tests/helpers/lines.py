"""Trial lines as a test writes them: a finished trial's `TrialLine` with what the test gives."""
from tasks.ablation.line import OK, TrialLine


def trial_line(config: str, seed: int, params=None, mode: str = "reinit", fraction: float = 1.0, group=None,
               key=None, status: str = OK, **fields) -> TrialLine:
    """A trial line of `config` at `seed` and `fraction`; `fields` given as None read as the line's defaults (what a
    trial that wrote no such section has)."""
    return TrialLine(key or f"{mode}|{config}|seed={seed}|fraction={fraction!r}|test", mode, config,
                     group or config, params or {}, seed, fraction, status,
                     **{k: v for k, v in fields.items() if v is not None})
