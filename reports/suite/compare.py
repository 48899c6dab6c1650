"""`kchaos compare DIR`: one row per configuration cell over every run below DIR, as compare.csv and compare.html.

Runs are grouped by their whole configuration except what does not change the
experiment (name, seed, store, Spark master, where Kafka came from): the
repetitions of one suite cell form one row. A row's verdict is its runs'
verdicts merged (fail > unknown > pass), its severity
the colour it gets, and, below a scenario, whether its
runs matched their prediction (scenario.json).

The headline numbers depend on the workload. A queue row has acknowledged and
lost writes, the loss inside Kafka's promise, availability and send latency; a
txn row its committed, aborted and indefinite transactions; a copy row its input,
the values copied, missing and duplicated; txn and copy rows the count of
anomalies that fail the verdict. A number that does not apply to a row's
workload is empty (None), never 0, in compare.csv and compare.html alike.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kchaos.checkers.outages import outages_of
from kchaos.checkers.send_errors import KEY as SEND_ERRORS
from kchaos.checkers.send_errors import errors_text, summed
from kchaos.checkers.verdict.judge import UNKNOWN, judge, lost_in_promise, merge
from kchaos.checkers.verdict.table import in_faults
from kchaos.core.config import with_defaults
from kchaos.core.page_cache import short as page_cache_short
from kchaos.core.promise import Promise
from kchaos.core.suite_files import STATE_FILE
from kchaos.core.workload_kind import WorkloadKind, all_kinds, known, name_of
from kchaos.reports import ReportsInputError
from kchaos.reports.html import write_page
from kchaos.reports.severity import level
from kchaos.reports.suite.heatmap import heatmap
from kchaos.reports.suite.run_index import index_for

__all__ = ["COLUMNS", "CompareError", "Run", "WRITES_ONLY", "anomaly_cells", "anomaly_kinds", "applies",
           "compare_rows", "configuration", "heatmap", "load_runs", "workload_columns", "write_compare"]

# Options that do not change what is being measured; runs differing only in these are repetitions.
NOT_CONFIGURATION = {"name", "seed", "store", "spark_master", "versions", "argv", "cluster.kafka_dist",
                     "cluster.base_image", "cluster.subnet", "nemesis.schedule_file", "history_start_unix_ms"}
# Options with a column of their own; any other option that differs between cells goes to `other`.
SHOWN = {"producer.acks", "topic.min_insync", "topic.replication_factor", "topic.unclean", "producer.idempotence",
         "nemesis.names", "workload.kind"}
ALWAYS = ("acks", "min_insync", "rf", "unclean", "idempotence", "nemesis")
COLUMNS = ("cell", "verdict", "severity", "prediction", "workload", *ALWAYS, "other", "runs", "pass", "fail",
           "unknown", "acked", "lost", "lost_in_promise", "lost_outside_promise", "loss_rate", "duplicate", "fails",
           "allowed", "unknown_because", "unparsed_lines", "kafka_internal", "kafka_errors",
           "availability_in_faults", "acked_time_share", "longest_outage_s", "send_p50_ms", "send_p99_ms",
           "send_errors", "promise", "page_cache", "run_dirs")
SUMMED = ("runs", "pass", "fail", "unknown", "checked", "acked", "lost", "duplicate", "lost_in_promise",
          "ok_in_faults", "invoked_in_faults", "unparsed_lines", "kafka_internal", "kafka_errors")
FAILING = "failing_anomalies"
# Columns that mean something only for a workload whose headline is acknowledged writes (`WorkloadKind.writes`).
WRITES_ONLY = ("acked", "lost", "lost_in_promise", "lost_outside_promise", "loss_rate", "duplicate",
               "availability_in_faults", "acked_time_share", "longest_outage_s", "send_p50_ms", "send_p99_ms",
               "send_errors")


def anomaly_kinds() -> tuple[str, ...]:
    """The anomaly kinds the registered workloads give a column (`WorkloadKind.anomalies`), in registry order: a
    column each (after COLUMNS) when some run has one, empty in the rows of a workload that does not count it. A
    queue run's order kinds go with its lost writes and stay in `fails`."""
    return tuple(dict.fromkeys(k for kind in all_kinds() for k in kind.anomalies if k not in ("duplicate", "acked")))


def workload_columns() -> dict[str, tuple[str, ...]]:
    """The headline numbers of the workloads whose headline is not acknowledged writes (`WorkloadKind.columns`),
    by workload: columns (after COLUMNS, before the anomaly kinds) only when some row runs that workload, with
    `failing_anomalies`, the anomalies that failed a run (Judgement.failed, summed)."""
    return {kind.name: kind.columns for kind in all_kinds() if kind.columns}


def _workload_summed() -> tuple[str, ...]:
    return (*(c for cs in workload_columns().values() for c in cs), FAILING)


SCENARIO_FILE = "scenario.json"


class CompareError(ReportsInputError):
    """Nothing to compare below the directory (exit code 3)."""


@dataclass(frozen=True)
class Run:
    """One run directory with its test description and results (empty when it was never checked)."""

    path: Path
    test: dict[str, Any]
    results: dict[str, Any]


def configuration(test: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The options of `test` that define its configuration cell, as sorted (dotted key, value) pairs, a field it
    leaves out at its default (core.config.with_defaults). What a run recorded about itself (its page cache, the
    releases a rolling upgrade ran) is not configuration."""
    flat = (pd.json_normalize(with_defaults(test)).to_dict("records") or [{}])[0]
    return tuple(sorted((k, _hashable(v)) for k, v in flat.items()
                        if k not in NOT_CONFIGURATION and not k.startswith(("page_cache.", "releases."))))


def _hashable(v: Any) -> Any:
    """A list as a tuple; a list of mappings (or anything else unhashable) as its JSON text."""
    if isinstance(v, list) and not any(isinstance(x, (dict, list)) for x in v):
        return tuple(v)
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def load_runs(root: Path) -> list[Run]:
    """Every run below `root` with a test.json, with its results.json's essentials ({} if it has none), from the
    results index of the store `root` is in (refreshed below `root` first)."""
    root = Path(root)
    with index_for(root) as index:
        index.refresh(root)
        top = root.resolve()
        rows = index.runs(top)
    runs = []
    for row in rows:
        if not row["test"]:
            continue  # no test.json, or one being written right now: not comparable
        path = root / (index.root / row["run"]).relative_to(top)
        runs.append(Run(path, row["test"], row["results"] or {}))
    return runs


def predictions(root: Path) -> dict[str, bool]:
    """Whether each run below `root` that a scenario judged matched its prediction, by its path below `root`
    (from every scenario.json below it)."""
    out: dict[str, bool] = {}
    for f in Path(root).rglob(SCENARIO_FILE):
        try:
            state = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for v in state.get("variants") or []:
            for r in v.get("runs") or []:
                if isinstance(r.get("run"), str):
                    out[os.path.relpath(f.parent / r["run"], root)] = bool(r.get("matched"))
    return out


def applies(workload: str, column: str) -> bool:
    """Whether `column` of compare.csv means something for a row of `workload`: the numbers of acknowledged writes
    only for a workload whose headline they are, each workload's headline numbers and anomaly kinds only for its
    own rows. Nothing of a workload kchaos does not know applies but the configuration's columns."""
    kind = known(workload)
    if column in WRITES_ONLY:
        return kind is not None and kind.writes
    if column == FAILING:
        return kind is not None and bool(kind.columns)
    owners = [k for k in all_kinds() if column in k.columns or column in k.anomalies]
    return not owners or kind in owners


def _workload_facts(kind: WorkloadKind | None, res: dict[str, Any], failed: dict[str, int]) -> dict[str, int]:
    """A run's headline numbers when they are not acknowledged writes (every workload's and `failing_anomalies`,
    0 where another workload's: blanked per row later)."""
    out = dict.fromkeys(_workload_summed(), 0)
    if kind is not None and kind.columns:
        out.update(kind.facts(res))
        out[FAILING] = sum(int(n) for n in failed.values())
    return out


def _facts(root: Path, run: Run, cfg: dict[str, Any], varying: list[str], matched: dict[str, bool]
           ) -> dict[str, Any]:
    """One run's share of its row: its configuration's columns, its verdict and counts (zero when never checked)."""
    res, settings = run.results, Promise.of(run.test)
    name = name_of(run.test)
    kind = known(name)
    j = judge(res, run.test)
    counts = res.get("counts") or {}
    ok, invoked = in_faults((res.get("timeline") or {}).get("availability") or {})
    latency = ((res.get("latency_ms") or {}).get("send") or {}).get("ok") or {}
    outages = outages_of(res)
    rel = str(run.path.relative_to(root))
    return {"cell": run.test.get("name", "?"), "acks": settings.acks, "min_insync": settings.min_insync,
            "rf": cfg.get("topic.replication_factor"), "unclean": settings.unclean,
            "idempotence": settings.idempotence, "nemesis": ",".join(cfg.get("nemesis.names") or ()) or None,
            "other": " ".join(f"{k.split('.')[-1]}={cfg.get(k)}" for k in varying) or None,
            "workload": name,
            "runs": 1, **{v: int(j.verdict == v) for v in ("pass", "fail", "unknown")}, "verdict": j.verdict,
            "judgement": j, "matched": matched.get(rel),
            "checked": bool(counts), **{k: counts.get(k) or 0 for k in ("acked", "lost", "duplicate")},
            "unparsed_lines": int((res.get("history") or {}).get("unparsed_lines") or 0),
            **_logged(res.get("kafka_errors") or {}),
            **{k: int(counts.get(k) or 0) if kind is not None and k in kind.anomalies else 0
               for k in anomaly_kinds()},
            **_workload_facts(kind, res, dict(j.failed)),
            "lost_in_promise": lost_in_promise(res) or 0,
            "ok_in_faults": ok, "invoked_in_faults": invoked,
            "outage_s": float(outages.get("total_s") or 0), "span_s": float(outages.get("span_s") or 0),
            "longest_outage_s": outages.get("longest_s"), "send_errors": res.get(SEND_ERRORS) or {},
            "send_p50_ms": latency.get("p50"), "send_p99_ms": latency.get("p99"),
            "promise": Promise.of(run.test), "page_cache": page_cache_short(run.test), "run_dirs": rel}


def _summed_errors(per_run: pd.Series) -> str | None:
    """The sends' errors of a cell's runs, counts summed, all in a line (`errors_text`); None when every send
    succeeded."""
    total = summed(item for errors in per_run for item in (errors or {}).items())
    return errors_text(total, most=len(total)) or None


def _logged(summary: dict[str, Any]) -> dict[str, int]:
    """A run's Kafka log columns: the kinds of internal fault Kafka logged (each makes the run unknown), and its
    ERROR and FATAL lines of every kind."""
    return {"kafka_internal": int((summary.get("kinds") or {}).get("internal") or 0),
            "kafka_errors": int(summary.get("errors") or 0) + int(summary.get("fatals") or 0)}


def _rounded(s: pd.Series, digits: int) -> pd.Series:
    # Python's round, not numpy's: numpy rounds 11.7225 to 11.722, where the value is above the half.
    return s.map(lambda x: round(x, digits))


def _grounds(judgements: pd.Series, which: str) -> str | None:
    """The failed (or allowed) kinds of a cell's runs, counts summed: `3 lost (why); 2 duplicate (why)`."""
    counts: Counter[str] = Counter()
    why: dict[str, str] = {}
    for j in judgements:
        counts.update(getattr(j, which))
        why.update(j.why.get(which) or {})
    return "; ".join(f"{n} {k}" + (f" ({why[k]})" if why.get(k) else "") for k, n in counts.items()) or None


def _undecided(judgements: pd.Series) -> str | None:
    """Why a cell's runs are unknown, each reason once, with how many runs it held for: `reason (2 runs)`."""
    reasons: Counter[str] = Counter(u for j in judgements if j.verdict == UNKNOWN for u in j.undecided)
    return "; ".join(r + (f" ({n} runs)" if n > 1 else "") for r, n in reasons.items()) or None


def _prediction(matched: pd.Series) -> str | None:
    known = [m for m in matched if m is not None]
    return None if not known else "matches" if all(known) else "misses"


def compare_rows(root: Path, runs: list[Run]) -> pd.DataFrame:
    """One row per configuration cell of `runs` (columns COLUMNS, then a column per kind of `anomaly_kinds` some
    cell has; missing values None), in the order cells first appear (sorted run paths): counts summed over
    repetitions, the median of their p50, the largest p99, the verdict merged over repetitions."""
    configs = [configuration(r.test) for r in runs]
    summed, kinds_of_anomaly, headlines = _workload_summed(), anomaly_kinds(), workload_columns()
    keys = [dict(c) for c in dict.fromkeys(configs)]
    varying = sorted(k for k in set().union(*keys) if k not in SHOWN and len({repr(d.get(k)) for d in keys}) > 1)
    matched = predictions(Path(root))
    # object columns keep ints and None as they are (rf, min_insync); only the measured columns are numbers
    facts = pd.DataFrame([{"config": c, **_facts(Path(root), r, dict(c), varying, matched)}
                          for r, c in zip(runs, configs)], dtype=object).astype(
        {**dict.fromkeys((*SUMMED, *summed, *kinds_of_anomaly), "int64"), "send_p50_ms": float,
         "send_p99_ms": float, "outage_s": float, "span_s": float, "longest_outage_s": float})
    rows = facts.groupby("config", sort=False).agg({
        "cell": lambda names: ",".join(sorted(set(names))),
        **dict.fromkeys((*ALWAYS, "workload", "other", "promise", "page_cache"), "first"),
        **dict.fromkeys((*SUMMED, *summed, *kinds_of_anomaly, "outage_s", "span_s"), "sum"),
        "send_p50_ms": "median", "send_p99_ms": "max", "longest_outage_s": "max", "send_errors": _summed_errors,
        "run_dirs": " ".join,
        "verdict": lambda vs: merge(list(vs)), "judgement": list, "matched": list})
    rows["lost_outside_promise"] = rows.lost - rows.lost_in_promise
    acked, invoked = rows.acked, rows.invoked_in_faults
    rows["loss_rate"] = _rounded(rows.lost / acked.where(acked > 0), 6)
    rows["availability_in_faults"] = _rounded(rows.ok_in_faults / invoked.where(invoked > 0), 4)
    span = rows.span_s
    rows["acked_time_share"] = _rounded(1 - rows.outage_s / span.where(span > 0), 4)
    rows["send_p50_ms"] = _rounded(rows.send_p50_ms, 3)
    rows["fails"] = rows.judgement.map(lambda js: _grounds(js, "failed"))
    rows["allowed"] = rows.judgement.map(lambda js: _grounds(js, "allowed"))
    rows["unknown_because"] = rows.judgement.map(_undecided)
    rows["severity"] = [level(v, lost, a, bool(al)) for v, lost, a, al in
                        zip(rows.verdict, rows.lost, rows.acked, rows.allowed)]
    rows["prediction"] = rows.matched.map(_prediction)
    rows["promise"] = [p.text for p in rows.promise]
    present = [k for k in kinds_of_anomaly if rows[k].any()]
    kinds = set(rows.workload)
    headline = [c for w, cs in headlines.items() if w in kinds for c in cs]
    headline += [FAILING] if kinds & set(headlines) else []
    out = rows[[*COLUMNS, *headline, *present]].astype(object)
    out = out.where(out.notna(), None).reset_index(drop=True)
    # The workload is part of the configuration, so a row's runs share one: blank what does not apply to it.
    for c in out.columns:
        out.loc[[not applies(w, c) for w in out.workload], c] = None
    out.attrs["failed_kinds"] = [set().union(*(j.failed for j in js)) for js in rows.judgement]
    return out


def anomaly_cells(table: pd.DataFrame) -> list[list[dict[str, Any]]]:
    """Per row of a compare_rows table, its non-zero `anomaly_kinds` as `{"kind", "count", "fails"}` (fails: the
    kind failed one of the cell's runs), for the headline table's one "anomalies" cell."""
    failed = table.attrs.get("failed_kinds") or [set()] * len(table)
    kinds = [k for k in anomaly_kinds() if k in table.columns]
    return [[{"kind": k, "count": r[k], "fails": k in f} for k in kinds if r[k]]
            for r, f in zip(table.to_dict("records"), failed)]


def chosen_axes(root: Path) -> set[str] | None:
    """The options the cells of the suite or scenario run at `root` set themselves (its suite.json's cells'
    params, "schedule" as the faults it names), the only axes its heat map may have; None for a directory of runs
    that is not one suite run."""
    try:
        cells = json.loads((Path(root) / STATE_FILE).read_text(encoding="utf-8")).get("cells")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(cells, list):
        return None
    keys = {k for c in cells if isinstance(c, dict) and isinstance(c.get("params"), dict) for k in c["params"]}
    return keys | ({"nemesis"} if "schedule" in keys else set())


def write_compare(root: Path, title: str | None = None) -> list[dict[str, Any]]:
    """Write root/compare.csv and root/compare.html for every run below `root`; return the rows.

    compare.html leads with one readable table (cell, verdict, prediction; for queue cells acked, lost and how much
    of it inside the promise, loss rate, availability in faults, p50/p99; for txn cells committed, aborted and
    indefinite transactions; for copy cells input, copied, missing, duplicated; for both the failing anomalies;
    each group of columns only when some cell runs that workload, empty in the others' rows; when some cell has
    one the anomalies by kind (one cell per row, failing kinds in red); when some run's node logs were read,
    Kafka's logs (internal faults in red, error lines); each run's report), then the heat map,
    then every column of compare.csv behind a "more columns" toggle. Raises CompareError when no run below `root` has a
    test.json.
    """
    root = Path(root)
    runs = load_runs(root)
    if not runs:
        raise CompareError(f"{root}: no runs (directories with history.jsonl and test.json) below it")
    table = compare_rows(root, runs)
    tmp = root / ".compare.csv.tmp"
    table.to_csv(tmp, index=False, lineterminator="\r\n")  # CRLF, as the csv module and checks.csv write it
    os.replace(tmp, root / "compare.csv")
    rows = table.to_dict("records")
    anomalies = anomaly_cells(table)
    tally = Counter(r["verdict"] for r in rows)
    write_page(root / "compare.html", title or f"kchaos compare {root.name}", template="compare.html.j2",
               heading=title or "Comparison", root=root, runs=len(runs), rows=rows,
               heatmap=heatmap(rows, chosen_axes(root)),
               columns=[c for c in table.columns if c not in ("other", "prediction") or table[c].notna().any()],
               anomalies=anomalies, any_anomaly=any(anomalies),
               tally=[(v, tally[v]) for v in ("pass", "fail", "unknown") if tally[v]],
               workloads={r["workload"] for r in rows}, applies=applies,
               predicted=table.prediction.notna().any(), logs_read=any("kafka_errors" in r.results for r in runs),
               reported={d for dirs in table.run_dirs for d in dirs.split() if (root / d / "report.html").exists()})
    return rows
