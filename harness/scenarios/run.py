"""Running a scenario: its variants as a suite in `<store>/scenarios/<name>/<stamp>/`, then each run's
observed metrics judged against the variant's prediction.

Besides everything a suite directory holds (progress.jsonl, the runs,
compare.csv/html, report.xml), a scenario directory gets `scenario.json`:
per variant its prediction; per repetition the run, seed, Kafka version,
wall seconds, observed metrics and whether the prediction held; how many
checked repetitions matched, with the 95% Wilson interval of that rate; the
spread of the metrics it was decided on; and the repetitions that errored,
counted apart (harness.scenario_stats). Each run also has its verdict
(pass, fail or unknown: docs/verdicts.md), a separate word: whether the
prediction matches or misses is said beside it, never instead. In
report.xml a variant fails when one of its runs missed the prediction.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from kchaos.checkers import judge_run
from kchaos.checkers.verdict.judge import merge
from kchaos.checkers.verdict.observed import ObserveError, observe
from kchaos.core.suite_files import latest, read_progress
from kchaos.harness.scenarios.scenario import Scenario
from kchaos.harness.scenarios.stats import Rate, spreads
from kchaos.harness.suites.run import JUNIT_FILE, Runner, run_suite
from kchaos.reports.suite.compare import write_compare
from kchaos.reports.suite.junit import CellOutcome, write_junit

RESULT_FILE = "scenario.json"
SHOWN = ("lost", "acked", "duplicate", "not_enough_replicas", "unavailable_s")
SPREAD = ("lost", "acked", "duplicate")  # always summarised over repetitions, with the prediction's own metrics
PER_RUN_UP_TO = 3  # the summary table lists each run's metrics up to this many, then their spread


@dataclass
class VariantResult:
    """A variant's repetitions: each run's metrics and whether the prediction held; errors for runs that broke."""

    name: str
    predict: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    errored: list[dict[str, Any]] = field(default_factory=list)  # rep, seed, run, error, seconds of each error
    metric_names: tuple[str, ...] = SPREAD

    @property
    def matched(self) -> int:
        """Repetitions whose observation bore out the prediction."""
        return sum(bool(r["matched"]) for r in self.runs)

    @property
    def rate(self) -> Rate:
        """Matched of the checked repetitions, with the errored ones apart (they are no evidence either way)."""
        return Rate(self.matched, len(self.runs), len(self.errors))

    def spread(self) -> dict[str, Any]:
        """min/median/max over the checked repetitions of lost, acked, duplicate and the prediction's metrics."""
        return {k: s.as_json() for k, s in spreads([r["metrics"] for r in self.runs], self.metric_names).items()}

    def as_json(self) -> dict[str, Any]:
        """The variant's entry in scenario.json."""
        rate = self.rate.as_json()
        return {"name": self.name, "predict": self.predict, "verdict": self.verdict, "prediction": self.prediction,
                "matched": self.matched, "checked": rate["runs"],
                "errored": rate["errored"], "rate": rate["rate"], "ci_low": rate["ci_low"],
                "ci_high": rate["ci_high"], "metrics": self.spread(), "runs": self.runs, "errors": self.errors,
                "errored_runs": self.errored}

    @property
    def agreed(self) -> bool:
        """Every repetition ran and matched."""
        return not self.errors and bool(self.runs) and self.matched == len(self.runs)

    @property
    def prediction(self) -> str | None:
        """"misses" when a checked repetition did not bear the prediction out, "matches" when every one did, None
        when none was checked."""
        return None if not self.runs else "matches" if self.matched == len(self.runs) else "misses"

    @property
    def verdict(self) -> str:
        """The checked repetitions' verdicts merged (fail > unknown > pass; unknown without any)."""
        return merge([r.get("verdict", "unknown") for r in self.runs])


def run_scenario(sc: Scenario, store: Path, *, repeat: int | None = None, only: tuple[str, ...] = (),
                 seed: int | None = None, resume: bool = False, spark_master: str = "local[*]",
                 console: Console | None = None, argv: list[str] | None = None,
                 runner: Runner | None = None, hosts: str | None = None) -> tuple[Path, list[VariantResult]]:
    """Run (or resume) the scenario's variants (`only` those named) `repeat` times, on the machines of
    hosts file `hosts` if given; judge and record them."""
    suite = sc.suite(repeat, only).on_hosts(hosts)
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
        res = VariantResult(v.name, v.predict.text, metric_names=tuple(dict.fromkeys((*SPREAD, *v.predict.names))))
        for e in mine:
            rdir = sdir / e.run if e.status == "done" and e.run else None
            error = None if rdir is not None else str(e.error)
            if rdir is not None:
                try:
                    m = observe(rdir)
                except ObserveError as err:
                    error = str(err)
            if rdir is None or error is not None:  # no evidence either way: counted apart from matched and missed
                res.errors.append(f"rep {e.rep + 1}: {error}")
                res.errored.append({"rep": e.rep, "seed": e.seed, "run": e.run, "error": error, "seconds": e.seconds})
                continue
            res.runs.append({"rep": e.rep, "run": e.run, "seed": e.seed, "kafka": _kafka(rdir),
                             "seconds": e.seconds, "verdict": judge_run(rdir).verdict, "metrics": m,
                             "matched": v.predict.holds(m)})
        results.append(res)
    state = {"scenario": sc.name, "description": sc.description, "mechanism": sc.mechanism, "prevents": sc.prevents,
             "variants": [r.as_json() for r in results]}
    (sdir / RESULT_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    if outcomes is not None:
        if any(o.row is not None for o in outcomes):  # again: compare.html shows each cell's prediction now
            write_compare(sdir, f"scenario {sc.name}")
        by_cell = {r.name: r for r in results}
        for o in outcomes:
            r = by_cell.get(o.name)
            if r is None:
                continue
            # the label is the first line of the case's system-out: the rate goes with it, pass or fail
            o.label = "\n".join([o.label.split("\n", 1)[0], f"prediction: {r.predict}", rate_line(r),
                                  *(f"{k}: {s}" for k, s in spread_text(r).items())])
            o.prediction = r.prediction
            if o.row is not None:  # the compare row written before the prediction was judged
                o.row = {**o.row, "prediction": r.prediction}
            if r.runs and r.matched < len(r.runs):
                o.mismatch = (f"predicted {r.predict}; held in {r.matched} of {len(r.runs)} run(s), "
                              f"{r.rate.interval()}: "
                              + "; ".join(observed_text(x["metrics"]) for x in r.runs if not x["matched"]))
        write_junit(sdir / JUNIT_FILE, f"scenario {sc.name}", outcomes)
    return results


def _kafka(run: Path) -> str | None:
    try:
        return json.loads((run / "test.json").read_text(encoding="utf-8"))["versions"]["kafka"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def observed_text(m: dict[str, float], names: tuple[str, ...] = SHOWN) -> str:
    """A run's metrics `names` as `lost=5 acked=100` (those it has)."""
    return " ".join(f"{k}={m[k]:g}" for k in names if k in m)


def rate_line(r: VariantResult) -> str:
    """`matched 3 of 4 checked run(s), 75% (95% CI 30%–95%)`, with the errored runs counted apart."""
    rate = r.rate
    errored = f"; {rate.errored} errored (not counted)" if rate.errored else ""
    return f"matched {rate.matched} of {rate.runs} checked run(s), {rate.interval()}{errored}"


def spread_text(r: VariantResult, names: tuple[str, ...] | None = None) -> dict[str, str]:
    """Each metric of `names` (default: the variant's) over its checked runs as `median (min–max)`."""
    return {k: s.text() for k, s in spreads([x["metrics"] for x in r.runs], names or r.metric_names).items()}
