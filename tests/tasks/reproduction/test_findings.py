"""findings/: every quote verbatim in its paper (../shared/papers/), every declaration complete and wired to
an experiment and a measure whose keywords fit."""
import inspect
import re
from pathlib import Path

import pytest

from tasks.reproduction import experiments as reproduction
from tasks.reproduction.findings import FINDINGS, PAPERS
from tests.helpers.reproduction import CTX

PAPERS_DIR = Path(__file__).resolve().parents[4] / "shared" / "papers"


def normalise(text: str) -> str:
    """Whitespace collapsed, so a quote matches across the paper's line breaks."""
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize("finding", FINDINGS, ids=[f.id for f in FINDINGS])
def test_every_quote_is_verbatim_in_its_paper(finding):
    path = PAPERS_DIR / finding.paper
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    assert normalise(finding.quote) in normalise(path.read_text(encoding="utf-8")), \
        f"{finding.id}: the quote is not in {finding.paper}"


def test_every_declaration_is_complete_and_wired():
    for f in FINDINGS:
        assert f.sesoi > 0 and f.sesoi_reason and f.setting and f.comparison and f.model_note, f.id
        if f.experiment is None:
            assert f.untestable, f.id
        else:
            assert f.experiment in reproduction.EXPERIMENTS and callable(f.measure), f.id
            inspect.signature(f.measure).bind(None, CTX, **f.keywords)  # its keywords fit
    papers = {f.paper for f in FINDINGS}
    assert papers == set(PAPERS) and all(sum(f.paper == p for f in FINDINGS) >= 4 for p in papers)
