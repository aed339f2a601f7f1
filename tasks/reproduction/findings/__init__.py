"""The five papers' headline findings, one declaration each (`verdicts.Finding`), fixed before any run.

One module per paper; each finding quotes its paper's sentence exactly (tests/test_reproduce.py checks it
against ../shared/papers/) and names its measure (measures.py) with its keywords. `FINDINGS` lists them in
the report's order, `PAPERS` names each paper's file. A changed protocol or extra seeds is a new
declaration (the same quote, `protocol` + 1, its own id), run as a follow-up beside the first: the first's
verdict stays in the report.
"""
from . import college, freeze, hao, singh, tamkin

PAPERS = {m.PAPER: m.TITLE for m in (tamkin, singh, hao, college, freeze)}
FINDINGS = [*tamkin.FINDINGS, *singh.FINDINGS, *hao.FINDINGS, *college.FINDINGS, *freeze.FINDINGS]
BY_ID = {f.id: f for f in FINDINGS}
assert len(BY_ID) == len(FINDINGS), "finding ids must be unique"
