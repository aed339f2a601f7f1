"""The reproduction tests' shared context and synthetic records: the experiments' cpu context, trial records
of a reinit sweep, kept runs and sittings, a finding's rows on its report page, a sweep's config built
directly."""
from tasks.reproduction import experiments as reproduction
from tasks.reproduction import kept as reproduction_runs
from tasks.reproduction import measures, sweeps
from tasks.reproduction.findings import BY_ID, PAGES
from tasks.reproduction.findings import hao as hao_findings
from tasks.reproduction.findings import singh as singh_findings
from tests.helpers.lines import trial_line

CTX = reproduction.Context(6, reproduction.SCALES["cpu"], dict(reproduction.ROLES))
SMALL, LARGE = CTX.scale.small, CTX.scale.large


def measure(finding_id: str, results) -> list:
    """The finding's rows, by the measure and keywords it declares."""
    finding = BY_ID[finding_id]
    return finding.measure(results, CTX, **finding.keywords)


def declared(finding_id: str, results) -> list:
    """The rows of the finding as its paper's module first declared it (before the null subtracted, issue
    54)."""
    finding = next(f for m in (singh_findings, hao_findings) for f in m.FINDINGS if f.id == finding_id)
    return finding.measure(results, CTX, **finding.keywords)


def record(config, seed, fraction, params=None, dev=None, curves=None, group=None, info=None, key=None,
           mode="reinit"):
    return trial_line(config, seed, params, mode, fraction, group, key, dev=dev, curves=curves, info=info)


def reinit(score, seeds=range(5)) -> list:
    return {f: [record(f"from={k}", s, f, {"scheme": "from", "from": k}, {"sst": score(k, f, s)})
                for k in range(7) for s in seeds] for f in (SMALL, LARGE)}


def results_of(score) -> measures.Results:
    results, by_fraction = measures.Results(), reinit(score)
    results.add("reinit-small", "reinit", by_fraction[SMALL])
    results.add("reinit-large", "reinit", by_fraction[LARGE])
    return results


def kept_run(experiment, label, seeds, **fields):
    return reproduction_runs.KeptRun(experiment, label, 1, "cpu", "minilm", dict(reproduction.ROLES),
                                     list(seeds), 6,
                                     {"reinit": ["--x"]}, **fields)


def sitting(**fields):
    return reproduction_runs.Sitting(**{"date": "2026-11-29 10:00 UTC", "commit": "abc",
                                        "machine": "test CPU",
                                        "wall_time_s": 60.0, "trials": 0, **fields})


def finding_rows(folder, finding_id: str) -> list:
    """A finding's run rows on its paper's page."""
    page = (folder / f"{PAGES[BY_ID[finding_id].paper]}.md").read_text()
    section = page.split(f'<a id="{finding_id}"></a>')[1].split("\n## ")[0]
    return [x for x in section.splitlines() if x.startswith("| ") and not x.startswith(("| run |", "|---"))]


def sweep_config(spec, scale, follow=None, seeds=(0, 1), setting=None):
    """The SweepConfig a sweep of the reproduction runs: built directly, no command line in between."""
    settings = sweeps.protocol(spec, scale, follow)
    return sweeps.sweep_config(spec.mode, settings, setting or sweeps.Setting("minilm"), seeds, "unused")
