"""What a person reads on the console when a command is done or planned: a run's summary, `kchaos check`'s
summary, why writes were lost (the largest groups by cause, and `kchaos explain`'s sentences), the suite, scenario
and repro tables with a legend under them, the scenarios there are, and what `--dry-run` would run.

Verdicts are the words of docs/verdicts.md (pass, fail, unknown; a scenario's prediction matches or misses,
beside the verdict), coloured by severity: never green for a run that lost writes.

A table fits a terminal by wrapping its least important columns, then leaving them out, and says which it
left out; the cell (or variant) name and the verdict are never shortened. Off a terminal every column is as
wide as its content.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from kchaos.checkers.kafka_errors import errors_line
from kchaos.checkers.outages import outages_of, outages_text
from kchaos.checkers.send_errors import KEY as SEND_ERRORS
from kchaos.checkers.send_errors import errors_text
from kchaos.checkers.verdict.judge import UNKNOWN, Judgement, history_line, lost_in_promise, of_valid
from kchaos.core.lines import LINE_WIDTH, short_lines
from kchaos.harness.phases import typical_fixed
from kchaos.harness.suites.spec_files import show
from kchaos.harness.terminal import interactive
from kchaos.reports.severity import RICH, level, rich_verdict, verdict_words

if TYPE_CHECKING:
    from kchaos.core.config import TestConfig
    from kchaos.core.workload_kind import Explainer
    from kchaos.harness.scenarios.run import VariantResult
    from kchaos.harness.scenarios.scenario import Scenario
    from kchaos.harness.suites.shard import Shard
    from kchaos.harness.suites.suite import Suite
    from kchaos.reports.suite.junit import CellOutcome
    from kchaos.reports.suite.regressions import Regression

WRAPPED_MIN = 8  # narrower, a wrapped column is no longer readable: it is left out instead
SEEDS_SHOWN = 4


@dataclass(frozen=True)
class Column:
    """A table column. A `keep` column is never shortened; the others wrap on a narrow terminal, and when
    even that is not enough the one with the highest `drop` is left out first (0: never left out)."""

    name: str
    justify: JustifyMethod = "left"
    keep: bool = False
    drop: int = 0


def fit_table(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> tuple[Table, list[str]]:
    """`rows` (rich markup) under `columns` as a table that fits `console`, and the names of the columns left out.
    Only when the kept columns alone are wider than the terminal do they wrap, between words: never cut."""
    live = interactive(console)
    shown, hidden = list(range(len(columns))), []
    while live and _needed(columns, rows, shown) > console.width:
        droppable = [i for i in shown if columns[i].drop]
        if not droppable:
            break
        worst = max(droppable, key=lambda i: columns[i].drop)
        shown.remove(worst)
        hidden.append(columns[worst].name)
    squeezed = live and _needed(columns, rows, shown) > console.width
    t = Table(box=None, pad_edge=False, show_edge=False)
    for i in shown:
        c = columns[i]
        wraps = live and (squeezed or not c.keep)
        t.add_column(c.name, justify=c.justify, no_wrap=not wraps, overflow="fold",
                     min_width=(cell_len(c.name) if c.keep else _width(c, rows, i)) if wraps else None)
    for r in rows:
        t.add_row(*(r[i] for i in shown))
    return t, hidden


def _width(c: Column, rows: Sequence[Sequence[str]], i: int) -> int:
    """The narrowest `c` can be: its whole content if kept, else its longest word up to WRAPPED_MIN."""
    texts = [c.name, *(Text.from_markup(r[i]).plain for r in rows)]
    if c.keep:
        return max(cell_len(line) for t in texts for line in t.split("\n"))
    return min(WRAPPED_MIN, max((cell_len(w) for t in texts for w in t.split()), default=1))


def _needed(columns: Sequence[Column], rows: Sequence[Sequence[str]], shown: list[int]) -> int:
    return sum(_width(columns[i], rows, i) for i in shown) + 2 * (len(shown) - 1)


def _legend(console: Console, lines: list[str], hidden: list[str], more: str) -> None:
    for line in lines:
        console.print("\n  ".join(short_lines(line, LINE_WIDTH - 2)), style="dim", markup=False, soft_wrap=False)
    if hidden:
        console.print(f"left out to fit the terminal: {', '.join(hidden)} ({more})", style="dim", markup=False,
                      soft_wrap=False)


# --- one run ---

def run_headline(cfg: TestConfig, run: Path) -> str:
    """`NAME seed=7 acks=all min.insync=2 → RUN`: which run the summary under it is about."""
    return f"{cfg.name} seed={cfg.seed} acks={cfg.producer.acks} min.insync={cfg.topic.min_insync} → {run}"


def run_summary(results: dict[str, Any]) -> str:
    """One screen of a run's results: the verdict and its severity in words (`verdict_words`), what failed, what
    was observed and allowed, and why it is unknown (docs/verdicts.md), the page-cache model, the faults Kafka
    reported about itself (one line), the sends' errors and the outages (a line each), then the counts and up to
    five examples of each anomaly."""
    j = Judgement.from_results(results)
    lines = j.lines()
    counts = results.get("counts") or {}
    lines[0] = "verdict: " + verdict_words(j.verdict, counts.get("lost"), counts.get("acked"),
                                           lost_in_promise(results), bool(j.allowed))
    # An unknown verdict already gives the damage as its reason; a failed one must still say it.
    if j.verdict != UNKNOWN and (damaged := history_line(results.get("history") or {})) is not None:
        lines.append(damaged)
    if results.get("page_cache"):
        lines.append(results["page_cache"])
    if (results.get("kafka_errors") or {}).get("total_groups"):
        lines.append(errors_line(results["kafka_errors"]))
    if results.get(SEND_ERRORS):
        lines.append(f"sends that did not succeed, by error: {errors_text(results[SEND_ERRORS])}")
    if (said := outages_text(outages_of(results))) is not None:
        lines.append(f"availability: {said}")
    counts = results.get("counts", {})
    width = max((len(k) for k in counts), default=0)
    lines += [f"  {k:<{width}} {v}" for k, v in counts.items()]
    for k, ex in results.get("examples", {}).items():
        if k != "acked":
            lines.append(f"  e.g. {k}: {ex[:5]}")
    return "\n".join(lines)


def print_run(console: Console, results: dict[str, Any]) -> None:
    """`run_summary` on `console`, its verdict line coloured by the run's severity."""
    counts = results.get("counts") or {}
    j = Judgement.from_results(results)
    style = RICH[level(j.verdict, counts.get("lost"), counts.get("acked"), bool(j.allowed))]
    first, _, rest = run_summary(results).partition("\n")
    console.print(first, style=style, markup=False, highlight=False)
    if rest:
        console.print(rest, markup=False, highlight=False)


def _or_dash(x: Any) -> str:
    """A compare row's number as text; "-" where it is missing or does not apply (a txn or copy cell's writes)."""
    return "-" if x is None else str(x)


def runs_summary(results: dict[str, Any]) -> str:
    """One line per run checked by `kchaos check DIR`: verdict, configuration, acked, lost, error. Run paths are
    never cut: the first column is as wide as the longest."""
    w = max([3, *(len(r["run"]) for r in results["runs"])])
    head = (f"{'run':<{w}} {'verdict':<8} {'acks':<4} {'minisr':<6} {'acked':>9} {'lost':>8} {'promised':<8} "
            "faults-avail")
    lines = [f"verdict: {results.get('verdict') or of_valid(results.get('valid'))}", head]
    for r in results["runs"]:
        verdict = r.get("verdict") or of_valid(r.get("valid"))
        line = (f"{r['run']:<{w}} {verdict:<8} {str(r['acks']):<4} {str(r['min_insync']):<6} "
                f"{str(r['acked']):>9} {str(r['lost']):>8} {str(r['loss_promised']):<8} {r['availability_in_faults']}")
        lines.append(line + (f"\n    error: {r['error']}" if r["error"] else ""))
    return "\n".join(lines)


# --- lost writes ---

def print_explanation(console: Console, explainer: Explainer, explanation: Mapping[str, Any],
                      all_groups: bool = False) -> None:
    """The explainer's lines on stdout as the explainer broke them (short lines, never wrapped or cut by the
    terminal); then the explanation's notes, or that there was nothing to explain, on `console`."""
    lines = explainer.lines(explanation, all_groups)
    for line in lines:
        print(line)
    for note in explanation.get("notes") or []:
        console.print(f"note: {note}", markup=False, highlight=False)
    if not lines:
        console.print(explainer.nothing)


# --- a suite ---

SUITE_COLUMNS = (Column("verdict", keep=True), Column("severity", drop=7), Column("cell", keep=True),
                 Column("runs pass/fail/?", "right", drop=3), Column("acked", "right", drop=5),
                 Column("lost (rate)", "right", drop=1), Column("inside promise", "right", drop=2),
                 Column("in faults", "right", drop=8), Column("outage", "right", drop=4), Column("promise", drop=6))
MAX_RATES = 5  # loss rates a suite's headline names
SUITE_LEGEND = {
    "verdict": "verdict: fail when a run shows an anomaly its configuration promises against, unknown when the "
               "checker could not decide, else pass; error when a run could not be run (docs/verdicts.md); "
               "coloured by its severity",
    "severity": "severity: severe when a promise broke or 10% or more of the acknowledged writes were lost, "
                "serious from 1%, noted for less or for other anomalies the configuration allows, else clean",
    "runs pass/fail/?": "runs pass/fail/?: the cell's runs, then how many passed / failed / are unknown",
    "inside promise": "inside promise: lost writes that Kafka's guarantee covered (each fails the run); "
                      "- when the configuration promises no loss",
    "in faults": "in faults: the share of sends made while a fault was on that were acknowledged",
    "outage": "outage: the longest stretch of the cell's runs in which no write was acknowledged",
    "promise": "promise: what the configuration promises (no loss: acks=all without unclean election; "
               "no duplicates: idempotence)",
}
GROUNDS_SHOWN = 10  # cells whose failed and allowed anomalies are listed under the suite table


@dataclass(frozen=True)
class Compared:
    """A configuration of `kchaos compare` as the suite table shows a cell: its compare row, verdict and
    severity."""

    row: dict[str, Any]
    error: str | None = None

    @property
    def result(self) -> str:
        """The row's verdict."""
        return str(self.row.get("verdict") or UNKNOWN)

    @property
    def severity(self) -> str:
        """The row's severity (compare.csv's column)."""
        return str(self.row.get("severity") or "unknown")

    @property
    def short(self) -> str:
        """The row's cell, as compare.csv names it."""
        return str(self.row.get("cell") or "")


def print_compare(console: Console, root: Path, rows: Sequence[dict[str, Any]]) -> None:
    """What `kchaos compare` found: a title line, the configurations as the suite table shows cells, the legend,
    and where compare.html and compare.csv are."""
    cells = [Compared(r) for r in rows]
    runs = sum(int(r.get("runs") or 0) for r in rows)
    console.print(f"compare {root}: {len(rows)} configurations, {runs} runs · {suite_words(cells, 'configuration')}",
                  style="bold", markup=False)
    _cell_table(console, cells)
    console.print(f"compare: {root / 'compare.html'}  csv: {root / 'compare.csv'}", markup=False)


def print_suite(console: Console, name: str, sdir: Path, outcomes: Sequence[CellOutcome]) -> None:
    """The suite's verdict: a title line, one row per cell (verdict, severity, cell, runs, acked, lost, lost inside
    the promise, availability in faults, promise), a legend, what failed or was observed and allowed per cell, and
    where compare.html and report.xml are."""
    console.print(f"suite {name}: {suite_words(outcomes)} · {sdir}", style="bold", markup=False)
    _cell_table(console, outcomes)
    console.print(f"compare: {sdir / 'compare.html'}  junit: {sdir / 'report.xml'}", markup=False)


def _cell_table(console: Console, outcomes: Sequence[CellOutcome | Compared]) -> None:
    """One row per cell, what failed or was observed and allowed per cell, and the legend."""
    rows = []
    for o in outcomes:
        r = o.row or {}
        rate, avail = r.get("loss_rate"), r.get("availability_in_faults")
        inside = r.get("lost_in_promise") if str(r.get("promise", "")).startswith("no loss") else None
        severity = "severe" if o.error else o.severity
        rows.append([rich_verdict(o.result, severity), rich_verdict(severity, severity), o.short,
                     f"{r.get('runs', 0)}: {r.get('pass', 0)}/{r.get('fail', 0)}/{r.get('unknown', 0)}",
                     _or_dash(r.get("acked")), _or_dash(r.get("lost")) + ("" if rate is None else f" ({rate:.1%})"),
                     "-" if inside is None else str(inside), "-" if avail is None else f"{avail:.0%}",
                     _outage(r.get("longest_outage_s")), str(r.get("promise", "-"))])
    table, hidden = fit_table(console, SUITE_COLUMNS, rows)
    console.print(table)
    grounds = [o for o in outcomes if o.row and (o.row.get("fails") or o.row.get("allowed")
                                                 or o.row.get("unknown_because"))]
    for o in grounds[:GROUNDS_SHOWN]:
        row = o.row or {}  # every ground has one
        parts = [f"fails: {row['fails']}"] if row.get("fails") else []
        parts += [f"observed, allowed: {row['allowed']}"] if row.get("allowed") else []
        parts += [f"unknown because: {row['unknown_because']}"] if row.get("unknown_because") else []
        parts += [f"page cache: {row['page_cache']}"] if row.get("page_cache") else []
        console.print("\n  ".join(short_lines(f"{o.short}: {'; '.join(parts)}", LINE_WIDTH - 2)), markup=False,
                      highlight=False)
    if len(grounds) > GROUNDS_SHOWN:
        console.print(f"... {len(grounds) - GROUNDS_SHOWN} more cells with anomalies: compare.html lists them",
                      markup=False)
    _legend(console, [v for k, v in SUITE_LEGEND.items() if k not in hidden], hidden, "compare.html has every column")


def _outage(seconds: float | None) -> str:
    """A cell's longest outage in its table: `13.4 s`, `none`, or `-` where it does not apply."""
    return "-" if seconds is None else "none" if not seconds else f"{seconds:.1f} s"


def suite_words(outcomes: Sequence[CellOutcome | Compared], what: str = "cell") -> str:
    """What a suite's cells (or `what`) came to, in words that carry the severity: `3 of 3 cells kept Kafka's
    promise · 2 of them lost acknowledged writes it does not cover (19.9%, 99.5%)`, then how many broke it, are
    unknown or could not run."""
    tally = Counter(o.result for o in outcomes)
    words = [f"{tally['pass']} of {len(outcomes)} {what}{'s' * (len(outcomes) != 1)} kept Kafka's promise"]
    words += [f"{tally[k]} {what}" for k, what in (("fail", "broke it"), ("unknown", "unknown"),
                                                   ("error", "could not run")) if tally[k]]
    lossy = [o.row["loss_rate"] for o in outcomes if o.result == "pass" and o.row and o.row.get("lost")
             and o.row.get("loss_rate") is not None]
    said = ", ".join(words)
    if lossy:
        rates = ", ".join(f"{r:.1%}" for r in lossy[:MAX_RATES]) + (", …" if len(lossy) > MAX_RATES else "")
        said += f" · {len(lossy)} of them lost acknowledged writes it does not cover ({rates})"
    return said


def print_regressions(console: Console, regressions: Sequence[Regression], before: Path | None) -> None:
    """The regressions of a suite night against the one before (`before`, None on a suite's first night): one line
    each, or one line saying there are none."""
    if before is None:
        console.print("regressions: none (no earlier night of this suite to compare with)", markup=False)
        return
    if not regressions:
        console.print(f"regressions: none since {before.name}", markup=False)
        return
    console.print(f"regressions since {before.name}: {len(regressions)}", style="bold red", markup=False)
    for r in regressions:
        console.print(f"  {r.what}: {r.text}", markup=False, highlight=False)


# --- a scenario ---

def print_scenario(console: Console, sc: Scenario, sdir: Path, results: Sequence[VariantResult]) -> None:
    """The scenario's verdict: a title line, one row per variant (verdict, variant, whether the prediction matches,
    the prediction, runs that matched it, the rate, what was observed) and a legend."""
    from kchaos.harness.scenarios.run import PER_RUN_UP_TO, SHOWN, observed_text, spread_text

    agreed = sum(r.agreed for r in results)
    console.print(f"scenario {sc.name}: predictions matched in {agreed}/{len(results)} variants · {sdir}",
                  style="bold", markup=False)
    many = any(len(r.runs) > PER_RUN_UP_TO for r in results)
    columns = (Column("verdict", keep=True), Column("variant", keep=True), Column("prediction", keep=True),
               Column("predicted", drop=2), Column("matched", drop=3), Column("rate (95% CI)", drop=4),
               Column("observed: median (min–max)" if many else "observed (per run)", drop=1))
    rows = []
    for r in results:
        names = tuple(dict.fromkeys((*SHOWN, *sc.variant_of_name(r.name).predict.names)))
        if len(r.runs) > PER_RUN_UP_TO:
            seen = [" ".join(f"{k}={v}" for k, v in spread_text(r, names).items())]
            seen += [f"[red]missed rep {x['rep'] + 1}: {observed_text(x['metrics'], names)}[/]"
                     for x in r.runs if not x["matched"]]
        else:
            seen = [observed_text(x["metrics"], names) for x in r.runs]
        seen += [f"[red]{e}[/]" for e in r.errors]
        lost, acked = (sum(int(x["metrics"].get(k) or 0) for x in r.runs) for k in ("lost", "acked"))
        verdict = rich_verdict(r.verdict, level(r.verdict, lost, acked)) if r.runs else ""
        verdict += (" " if r.runs else "") + f"[red]{len(r.errors)} error[/]" if r.errors else ""
        word = {"matches": "[green]matches[/]", "misses": "[red]misses[/]"}.get(r.prediction or "", "-")
        rows.append([verdict, r.name, word, r.predict, r.rate.fraction(), r.rate.interval(), "\n".join(seen)])
    table, hidden = fit_table(console, columns, rows)
    console.print(table)
    legend = ["verdict: the checked runs' verdict (docs/verdicts.md), pass, fail or unknown; N error: runs that could "
              "not be run",
              "prediction: matches when every run bore out the prediction; misses when one did not"]
    if any(r.errors for r in results):
        legend.append("errored runs are not evidence either way: they count in neither matched nor the rate")
    _legend(console, legend, hidden, f"scenario.json has them: {sdir / 'scenario.json'}")


# --- a repro ---

def print_repro(console: Console, report: dict[str, Any]) -> None:
    """The repro's verdict: a title line and one row per attempt (reproduced, anomalies, lost/acked, run)."""
    console.print(f"repro of {report['original']}: anomalies {', '.join(report['anomalies']) or 'none'} "
                  f"reappeared in {report['reproduced']}/{report['attempts']} attempt(s)", style="bold", markup=False)
    columns = (Column("attempt", keep=True), Column("reproduced", keep=True), Column("verdict", drop=5),
               Column("anomalies", drop=1), Column("lost/acked", drop=2), Column("same faults", drop=3),
               Column("run", drop=4))
    rows = []
    for i, r in enumerate(report["runs"], 1):
        c = r.get("counts") or {}
        rows.append([str(i), "[green]yes[/]" if r["reproduced"] else "[red]no[/]",
                     r.get("verdict") or ("error" if r.get("error") else of_valid(r.get("valid"))),
                     ", ".join(r["anomalies"]) or (r.get("error") or "none"),
                     f"{c.get('lost', '-')}/{c.get('acked', '-')}", str(r.get("same_faults", "-")), str(r["run"])])
    table, hidden = fit_table(console, columns, rows)
    console.print(table)
    _legend(console, [], hidden, f"repro.json has them: {report.get('dir', '')}")


# --- a shrink ---

def print_shrunk(console: Console, out: dict[str, Any]) -> None:
    """The shrink's result: how much smaller the schedule got, where it is and how to replay it."""
    a, b = out["original_size"], out["smallest"]["size"]
    console.print(f"shrunk {out['anomaly']}: {a['episodes']:g} → {b['episodes']:g} faults, "
                  f"{a['nodes']:g} → {b['nodes']:g} nodes aimed at, "
                  f"{a['fault_s']:g} → {b['fault_s']:g} s of faults, "
                  f"{a['time_limit']:g} → {b['time_limit']:g} s run; "
                  f"{out['tried']} candidates, {out['runs']} runs", style="bold", markup=False)
    console.print(f"schedule: {out['dir']}/schedule.json\nreplay: {out['replay']}", markup=False)


def print_lines(console: Console, lines: Sequence[str]) -> None:
    """`lines` as they are: no markup, no highlighting (a plan, a list of paths)."""
    for line in lines:
        console.print(line, markup=False, highlight=False)


def print_scenarios(console: Console, scenarios: Sequence[Scenario]) -> None:
    """`kchaos scenario --list`: each scenario's name and description, then each variant and what it predicts."""
    for sc in scenarios:
        console.print(f"[bold]{sc.name}[/]: {sc.description}", highlight=False)
        for v in sc.variants:
            console.print(f"    {v.name:<28} predicts {v.predict.text}", highlight=False, markup=False)


# --- --dry-run ---

def run_plan(cfg: TestConfig, where: Path) -> list[str]:
    """What `kchaos run` would do with `cfg` (through preflight): the cluster, topic, producers and clients, and
    every fault op of the schedule with its time, nemesis and op; nothing is started or created."""
    from kchaos.core.workload_kind import kind_of
    from kchaos.nemesis.schedule import kills_closer_than, make_schedule

    c, t, p = cfg.cluster, cfg.topic, cfg.producer
    schedule = make_schedule(cfg)
    where_nodes = f"on the hosts of {c.hosts}" if c.hosts else "in Docker containers"
    controllers = f" and {c.controllers} controllers" if c.controllers else ""
    lines = [f"run {cfg.name}: seed {cfg.seed}, {_minutes(cfg.time_limit)} of workload → {where}",
             f"cluster: Kafka {c.kafka_version}, {c.nodes} brokers{controllers} {where_nodes}, storage {c.storage}",
             f"topic: {t.partitions} partitions, rf {t.replication_factor}, min.insync {t.min_insync}, "
             f"unclean election {'on' if t.unclean else 'off'}",
             f"producers: acks={p.acks}, idempotence {'on' if p.idempotence else 'off'}",
             kind_of(cfg.workload.kind).describe(cfg)]
    n = cfg.nemesis
    source = f"replayed from {n.schedule_file}" if n.schedule_file else f"drawn from seed {cfg.seed}"
    if schedule:
        lines.append(f"faults: {', '.join(n.names)}; {len(schedule)} op{'s' * (len(schedule) != 1)} {source}, "
                     "then the heal")
    else:
        lines.append("faults: none" if n.names == ("none",) else
                     f"faults: {', '.join(n.names)}; no op fits in --time-limit {cfg.time_limit:g} s: none")
    for s in schedule:
        detail = " ".join(f"{k}={v}" for k, v in s.op.items() if k not in ("f", "pick"))
        lines.append(f"  {s.at:6.1f} s  {s.nemesis}  {s.op.get('f')}{' ' + detail if detail else ''}")
    session_s = c.broker_session_timeout_ms / 1000
    if (gap := kills_closer_than(schedule, session_s)) is not None:
        lines.append(f"note: kills {gap:.1f} s apart, under broker.session.timeout.ms ({session_s:g} s): a killed "
                     f"broker's restart is refused until its session expires")
    return lines


def suite_plan(suite: Suite, seed: int | None, where: Path, shard: Shard | None = None) -> list[str]:
    """What `kchaos suite FILE` would run (with `shard`, that shard of it): the options every cell shares, then
    each cell it runs with the seeds of its repetitions there."""
    from kchaos.harness.suites.shard import WHOLE, share
    shard = shard or WHOLE
    mine = share(suite, shard)
    runs = len(mine)
    seconds = sum(suite.config(c, 0, Path("/tmp"), "local[*]").time_limit for _, c, _ in mine)
    fixed, measured = typical_fixed(where.parents[2])
    part = "" if shard.whole else f", shard {shard}: {runs} of them"
    lines = [f"suite {suite.name}: {len(suite.cells)} cells × {_times(suite.repeat)} = "
             f"{len(suite.cells) * suite.repeat} runs{part}, "
             f"seed {'random' if seed is None else seed}, {_minutes(seconds)} of workload → {where}",
             f"about {_about(seconds + runs * fixed)} in all: each run also spends about {fixed:.0f} s starting, "
             "healing, reading, checking and reporting ("
             + ("a guess: this store has no run to measure it by" if not measured else "as this store's newest run did"
                if measured == 1 else f"the median of this store's {measured} newest runs") + ")"]
    shared = _shared([c.options for c in suite.cells], [c.params for c in suite.cells])
    if shared:
        lines.append("every cell: " + " ".join(f"{k}={show(v)}" for k, v in shared))
    reps: dict[str, list[int]] = {}
    for _, c, r in mine:
        reps.setdefault(c.name, []).append(r)
    cells = [c for c in suite.cells if c.name in reps]
    w, lw = max(len(c.name) for c in cells), max(len(c.label()) for c in cells)
    for c in cells:
        seeds = "" if seed is None else "  " + _seeds([suite.run_seed(seed, c, r) for r in reps[c.name]])
        lines.append(f"  {c.name:<{w}}  {c.label():<{lw}}{seeds}".rstrip())
    return lines


def scenario_plan(sc: Scenario, suite: Suite, seed: int, where: Path) -> list[str]:
    """What `kchaos scenario NAME` would run: each variant of `suite` (the scenario as a suite) with its
    prediction, its options, its faults and its seeds."""
    lines = [f"scenario {sc.name}: {len(suite.cells)} variants × {_times(suite.repeat)} = "
             f"{len(suite.cells) * suite.repeat} runs, seed {seed} → {where}"]
    for c in suite.cells:
        v = sc.variant_of_name(c.name)
        opts = dict(c.options)
        faults = f"schedule of {len(v.schedule)} faults" if v.schedule is not None else \
            f"nemesis {show(opts.get('nemesis', 'kill-leader'))}"
        shown = " ".join(f"{k}={show(x)}" for k, x in c.options if k != "schedule")
        lines.append(f"  {v.name}: predicts {v.predict.text}")
        lines.append(f"      {shown}; {faults}; " + _seeds([suite.run_seed(seed, c, r) for r in range(suite.repeat)]))
    return lines


def _shared(options: list[tuple], params: list[tuple]) -> list[tuple[str, Any]]:
    """The (key, value) pairs every cell has, that no cell sets itself: the suite's base as it applies."""
    own = [dict(o) for o in options]
    keys = [k for k, _ in options[0] if all(k not in dict(p) for p in params)]
    return [(k, own[0][k]) for k in keys if all(k in o and show(o[k]) == show(own[0][k]) for o in own)]


def _seeds(seeds: list[int]) -> str:
    """`seed 7`, `seeds 7, 9`, `seeds 7, 9, 11, 13 and 6 more`."""
    more = f" and {len(seeds) - SEEDS_SHOWN} more" if len(seeds) > SEEDS_SHOWN else ""
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds[:SEEDS_SHOWN])) + more


def _times(n: int) -> str:
    return "1 repetition" if n == 1 else f"{n} repetitions"


def _about(seconds: float) -> str:
    """An estimate's duration: `50 s`, `25 min`, `3 h 07 min`."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"


def _minutes(seconds: float) -> str:
    return f"{seconds:g} s" if seconds < 120 else f"{seconds / 60:.0f} min"
