"""A report line as data: one finding judged on one run (report.json's `lines`, read back for another model's column).

Typed and versioned: `Line.to_json` writes it, `Line.from_json` reads it and refuses another schema (a report.json
older than this code is rewritten with `reproduce.py --report-only`), so a reader writes `line.holm.verdict`.
"""
from dataclasses import asdict, dataclass, fields
from typing import Optional

from minbert import UserError

from .power import Power

SCHEMA = 2   # 1: the dict report.py built before issue 54 (no dates, no roles)


@dataclass(frozen=True)
class RowLine:
    """One row of a line: its estimate at its level and its verdict."""
    label: str
    effect: Optional[float]
    level: Optional[float]
    interval: tuple             # (low, high), None where not computed
    n: Optional[int]
    verdict: str
    pending: Optional[str]      # the follow-up or command that would measure a pending row


@dataclass(frozen=True)
class Holm:
    """Holm's step-down over the headline lines with a p (front.holm)."""
    p: float
    p_adjusted: float
    verdict: str


@dataclass(frozen=True)
class Dated:
    """A dated declaration or revision of a line's rule (findings/history.py)."""
    date: str
    commit: str
    what: str
    before: str


@dataclass(frozen=True)
class Line:
    """One finding on one run, as report.json keeps it."""
    finding: str
    paper: str
    quote: str
    tested: Optional[str]
    run: str                    # "first" or a follow-up's label
    role: str                   # "headline", "pilot" (a first run a confirmatory run has since decided), "sensitivity"
    experiment: Optional[str]
    protocol: int
    reads: tuple                # ((experiment, run label), ...)
    rows: tuple                 # RowLine
    decisive: Optional[int]     # the index of the row that decides it
    sesoi: float
    kind: str
    combine: str
    sesoi_reason: str
    sesoi_from_pilot: bool
    verdict: str
    verdict_text: str
    power: Optional[Power]      # power.assess's figures
    decides: str
    disclosure: str
    device: str
    fragile: bool
    unfinished_run: bool
    holm: Optional[Holm]
    declared: Dated             # the line's declaration
    revisions: tuple            # Dated, oldest first: each later change to its rule
    rule_date: str              # the commit date that last changed its rule
    data_dates: tuple           # (first, last) sitting of the kept runs it reads; () without data
    history: str                # "declared before its data", "revised after its data: ..." or "declared after ..."
    revised_after_data: bool
    registered: str             # "confirmatory run registered DATE, not yet run" where one is and has not decided it
    holding: tuple              # (rows that hold, rows measured)

    @property
    def headline(self) -> bool:
        return self.role == "headline"

    @property
    def mixed(self) -> bool:
        """Rows that disagree: some hold and some do not."""
        return 0 < self.holding[0] < self.holding[1]

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self), "power": self.power.to_json() if self.power else None}

    @classmethod
    def from_json(cls, data: dict, where: str = "report.json") -> "Line":
        schema = data.get("schema", 1)
        if schema != SCHEMA:
            raise UserError(f"{where}: a report line of schema {schema}, this code reads {SCHEMA}: "
                            f"rewrite it with python reproduce.py --report-only")
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        return cls(**{**data, "reads": tuple(map(tuple, data["reads"])),
                      "rows": tuple(RowLine(**{**r, "interval": tuple(r["interval"])}) for r in data["rows"]),
                      "holm": Holm(**data["holm"]) if data["holm"] else None,
                      "power": Power.from_json(data["power"]),
                      "declared": Dated(**data["declared"]),
                      "revisions": tuple(Dated(**r) for r in data["revisions"]),
                      "data_dates": tuple(data["data_dates"]), "holding": tuple(data["holding"])})
