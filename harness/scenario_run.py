"""Running a scenario: its variants as a suite in `<store>/scenarios/<name>/<stamp>/`, then each run's
observed metrics judged against the variant's prediction.

Besides everything a suite directory holds (progress.jsonl, the runs,
compare.csv/html, report.xml), a scenario directory gets `scenario.json`:
per variant its prediction, and per repetition the run, seed, observed
metrics and whether the prediction held. In report.xml a variant fails when
one of its runs did not bear out the prediction.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from checkers.observed import ObserveError, observe
from harness.scenario import Scenario
from harness.suite_run import JUNIT_FILE, Runner, latest, read_progress, run_suite
from reports.junit import CellOutcome, write_junit

RESULT_FILE = "scenario.json"
SHOWN = ("lost", "acked", "duplicate", "not_enough_replicas", "unavailable_s")


@dataclass
class VariantResult:
    """A variant's repetitions: each run's metrics and whether the prediction held; errors for runs that broke."""

    name: str
    predict: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        """Repetitions whose observation bore out the prediction."""
        return sum(bool(r["matched"]) for r in self.runs)

    @property
    def agreed(self) -> bool:
        """Every repetition ran and matched."""
        return not self.errors and bool(self.runs) and self.matched == len(self.runs)


def run_scenario(sc: Scenario, store: Path, *, repeat: int | None = None, only: tuple[str, ...] = (),
                 seed: int | None = None, resume: bool = False, spark_master: str = "local[*]",
                 console: Console | None = None, argv: list[str] | None = None,
                 runner: Runner | None = None) -> tuple[Path, list[VariantResult]]:
    """Run (or resume) the scenario's variants (`only` those named) `repeat` times; judge and record them."""
    suite = sc.suite(repeat, only)
    sdir, outcomes = run_suite(suite, store, resume=resume, seed=sc.seed if seed is None and not resume else seed,
                               spark_master=spark_master, console=console, argv=argv, runner=runner,
                               kind="scenarios")
    return sdir, judge(sc, sdir, outcomes)


def judge(sc: Scenario, sdir: Path, outcomes: list[CellOutcome] | None = None) -> list[VariantResult]:
    """Observe every finished run of scenario directory `sdir`, decide the predictions, write scenario.json
    (and report.xml again, with missed predictions as failures, when `outcomes` are given)."""
    entries = latest(read_progress(sdir)).values()
    results = []
    for v in sc.variants:
        mine = sorted((e for e in entries if e.cell == v.cell.name), key=lambda e: e.rep)
        if not mine:
            continue
        res = VariantResult(v.name, v.predict.text)
        for e in mine:
            if e.status != "done" or not e.run:
                res.errors.append(f"rep {e.rep + 1}: {e.error}")
                continue
            try:
                m = observe(sdir / e.run)
            except ObserveError as err:
                res.errors.append(f"rep {e.rep + 1}: {err}")
                continue
            res.runs.append({"rep": e.rep, "run": e.run, "seed": e.seed, "metrics": m, "matched": v.predict.holds(m)})
        results.append(res)
    state = {"scenario": sc.name, "description": sc.description, "mechanism": sc.mechanism, "prevents": sc.prevents,
             "variants": [{"name": r.name, "predict": r.predict, "matched": r.matched, "runs": r.runs,
                           "errors": r.errors} for r in results]}
    (sdir / RESULT_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    if outcomes is not None:
        by_cell = {r.name: r for r in results}
        for o in outcomes:
            r = by_cell.get(o.name)
            if r is not None and r.runs and r.matched < len(r.runs):
                o.mismatch = (f"predicted {r.predict}; held in {r.matched} of {len(r.runs)} run(s): "
                              + "; ".join(_observed(x["metrics"]) for x in r.runs if not x["matched"]))
        write_junit(sdir / JUNIT_FILE, f"scenario {sc.name}", outcomes)
    return results


def _observed(m: dict[str, float], names: tuple[str, ...] = SHOWN) -> str:
    return " ".join(f"{k}={m[k]:g}" for k in names if k in m)


def scenario_table(sc: Scenario, sdir: Path, results: list[VariantResult]):  # noqa: ANN201 - rich.table.Table
    """One line per variant: prediction, repetitions that matched it, and what was observed."""
    from rich.table import Table

    agreed = sum(r.agreed for r in results)
    t = Table(title=f"scenario {sc.name}: predictions held in {agreed}/{len(results)} variants · {sdir}",
              title_justify="left", box=None, pad_edge=False)
    for col in ("result", "variant", "prediction", "matched", "observed (per run)"):
        t.add_column(col, overflow="fold")
    for r in results:
        names = tuple(dict.fromkeys((*SHOWN, *sc.variant_of_name(r.name).predict.names)))
        seen = [_observed(x["metrics"], names) for x in r.runs] + [f"[red]{e}[/]" for e in r.errors]
        mark = "[green]AGREED[/]" if r.agreed else "[red]ERROR[/]" if not r.runs else "[red]MISSED[/]"
        t.add_row(mark, r.name, r.predict, f"{r.matched}/{len(r.runs) + len(r.errors)}", "\n".join(seen))
    return t
