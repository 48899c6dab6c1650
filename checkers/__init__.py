"""Checkers: find the anomalies of a recorded history, judge the run (checkers/verdict/judge.py), write results.json.

A new checker is one module implementing core.protocols.Checker (with a
constructor taking `master=`, and `check_many` for checking several runs in
one job) plus one line in CHECKERS.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kchaos.checkers.compose import exit_code, merge_valid, run_checkers
from kchaos.checkers.copy.check import COPY, CopyChecker
from kchaos.checkers.corrupt_reads import KIND as CORRUPT_READ
from kchaos.checkers.corrupt_reads import corrupt_reads
from kchaos.checkers.history_scan import HistoryScan, nemesis_section, scan
from kchaos.checkers.kafka_errors import kafka_errors
from kchaos.checkers.parquet import CheckInputError, convert, parquet_path
from kchaos.checkers.queue.check import QueueChecker
from kchaos.checkers.spark import prestart
from kchaos.checkers.txn.check import TxnSparkChecker
from kchaos.checkers.txn.reference import TxnChecker
from kchaos.checkers.verdict.judge import SOURCE, TXN, Judgement, judge, judged, merge
from kchaos.checkers.verdict.promise import Events, classify
from kchaos.checkers.verdict.promise_run import loss_section
from kchaos.core.faults import FaultsError, read_faults, run_faults
from kchaos.core.promise import Promise
from kchaos.core.protocols import Checker

CHECKERS: dict[str, Callable[..., Checker]] = {
    SOURCE: QueueChecker,
}
# Workloads whose histories the queue checkers cannot read: their own checkers, by workload kind. Their runs are
# neither converted to Parquet nor given the queue checkers; the checker validates the history itself. The txn
# workload's runs on Spark, as the queue's does; its reference (TxnChecker, checkers/txn/reference.py) stays the
# definition it is tested against and the baseline it is timed against (REFERENCE_CHECKERS).
WORKLOAD_CHECKERS: dict[str, dict[str, Callable[..., Checker]]] = {
    TXN: {TXN: TxnSparkChecker},
    COPY: {COPY: CopyChecker},
}
REFERENCE_CHECKERS: dict[str, dict[str, Callable[..., Checker]]] = {
    TXN: {TXN: TxnChecker},
}

HISTORY_FILE = "history.jsonl"
TEST_FILE = "test.json"
RESULTS_FILE = "results.json"
# Copied from the queue checker's result to the top level of results.json.
SUMMARY_KEYS = ("counts", "examples", "loss", "stats", "latency_ms", "timeline")

__all__ = ["CHECKERS", "REFERENCE_CHECKERS", "WORKLOAD_CHECKERS", "CheckInputError", "QueueChecker", "check_path",
           "check_runs", "check_tree", "exit_code", "find_runs", "judge", "judge_loss", "judge_run", "merge_valid",
           "rejudge_loss", "run_checkers", "validate_history"]


def check_path(path: Path, spark_master: str = "local[*]") -> dict[str, Any]:
    """Check a run directory (holding history.jsonl) or a bare history file.

    test.json beside the history is used if present, else `{}` (idempotence
    off). Returns `{"valid", "verdict", "failed", "allowed", "why", "page_cache",
    "undecided", "counts", "examples", "loss", "stats", "latency_ms",
    "timeline", "checkers": {name: full result}}` and writes it as
    results.json beside the history: `verdict` is checkers.verdict.judge's
    word, and `valid` matches it (True pass, False fail, "unknown"). Raises CheckInputError, before
    running any checker, for a missing path, a directory without
    history.jsonl, an unreadable test.json or faults.json, or a malformed
    history (see `validate_history`). The history is converted to Parquet
    beside it once (checkers/parquet.py), validated on the way; the checkers
    read that.
    """
    path = Path(path)
    if not path.exists():
        raise CheckInputError(f"{path}: no such file or directory")
    history = path / HISTORY_FILE if path.is_dir() else path
    if not history.is_file():
        raise CheckInputError(f"{path}: no {HISTORY_FILE} in this directory")
    if history.name == HISTORY_FILE:
        from kchaos.core.send_stream import merge_streams  # here: pyarrow's IPC costs start-up in every checker

        merge_streams(history.parent)  # a killed run's producer streams (core/send_stream.py)
    facts = scan(history)
    test = _load_test(history.parent / TEST_FILE)
    _check_faults(history.parent)
    own = WORKLOAD_CHECKERS.get(workload_kind(test, history))
    if own is not None:
        return _write_result(history, run_own(own, test, history, spark_master), facts, spark_master)
    prestart(spark_master)  # the JVM starts while the history converts
    convert(history, validate=True)
    checkers = {name: make(master=spark_master) for name, make in CHECKERS.items()}
    return _write_result(history, run_checkers(checkers, test, history), facts, spark_master)


def workload_kind(test: dict[str, Any], history: Path) -> str:
    """The workload that recorded `history`: test.json's `workload.kind`; without one, "txn" if one of the
    history's first 1000 lines is a txn op, else "queue"."""
    kind = (test.get("workload") or {}).get("kind")
    if isinstance(kind, str):
        return kind
    with open(history, encoding="utf-8", errors="replace") as fh:
        for _, line in zip(range(1000), fh):
            if '"f":"txn"' in line.replace(" ", ""):
                return TXN
    return SOURCE


def run_own(checkers: dict[str, Callable[..., Checker]], test: dict[str, Any], history: Path,
            spark_master: str = "local[*]") -> dict[str, Any]:
    """Run a workload's own checkers (WORKLOAD_CHECKERS) like `run_checkers`, on Spark master `spark_master`,
    except that a CheckInputError (a malformed history) propagates: bad input, not an unknown verdict."""
    return run_checkers({name: make(master=spark_master) for name, make in checkers.items()}, test, history,
                        passthrough=(CheckInputError,))


def _write_result(history: Path, composed: dict[str, Any], facts: HistoryScan, spark_master: str) -> dict[str, Any]:
    source = next((k for k in (TXN, COPY) if k in composed), SOURCE)
    queue = composed.get(source, {})
    test = _load_test(history.parent / TEST_FILE)
    result: dict[str, Any] = {"valid": composed["valid"]}
    result.update({k: queue[k] for k in (*SUMMARY_KEYS, "unseen_undecided", "cycles") if k in queue})
    result["history"] = facts.as_json()
    asked = tuple((test.get("nemesis") or {}).get("names") or ())
    result["nemesis"] = nemesis_section(facts, run_faults(history.parent, facts.nemesis), asked)
    if "loss" in result:
        result["loss"] = {**result["loss"], **judge_loss(history, result)}
    if source == SOURCE and "counts" in result and (flipped := corrupt_reads(history)) is not None:
        result["counts"] = {**result["counts"], CORRUPT_READ: flipped["count"]}
        result["examples"] = {**(result.get("examples") or {}), CORRUPT_READ: flipped["examples"]}
    result["checkers"] = {k: v for k, v in composed.items() if k != "valid"}
    if (logged := kafka_errors(history.parent, spark_master, history=facts)) is not None:
        result["kafka_errors"] = logged
    # The checkers' merged `valid` counts every anomaly; the run's word also weighs what the configuration allows.
    result = judged(result, test)
    _write_json(history.parent / RESULTS_FILE, result)
    return result


def judge_loss(history: Path, result: dict[str, Any]) -> dict[str, Any]:
    """Kafka's guarantee applied to each lost write of a checked run (checkers/verdict/promise.py); the run's
    isr.jsonl and test.json beside `history` are read. Never fails the check: an unreadable input leaves
    every loss inside the promise and says why."""
    test = _load_test(history.parent / TEST_FILE)
    try:
        return loss_section(history.parent, parquet_path(history), test, result)
    except Exception as e:
        out = classify([], Events(), Promise.of(test), int((result.get("counts") or {}).get("lost") or 0))
        return {**out, "error": f"{type(e).__name__}: {e}"}


def rejudge_loss(run: Path) -> dict[str, Any]:
    """Apply the guarantee again to a checked run's lost writes (after its evidence was decoded, the KRaft
    metadata log gives the exact ISR), judge the run again and rewrite results.json; return the results.
    Raises CheckInputError when the run was never checked."""
    path = Path(run) / RESULTS_FILE
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise CheckInputError(f"{path}: no readable results ({e})") from None
    if "loss" in result:
        result["loss"] = {**result["loss"], **judge_loss(Path(run) / HISTORY_FILE, result)}
        result = judged(result, _load_test(Path(run) / TEST_FILE))
        _write_json(path, result)
    return result


def judge_run(run: Path) -> Judgement:
    """The verdict of a run directory from its results.json and test.json (checkers/verdict/judge.py), as every surface
    shows it; "unknown" (not checked) without a readable results.json."""
    try:
        results = json.loads((Path(run) / RESULTS_FILE).read_text(encoding="utf-8"))
        test = json.loads((Path(run) / TEST_FILE).read_text(encoding="utf-8")) if (Path(run) / TEST_FILE).exists() \
            else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        results, test = {}, {}
    return judge(results if isinstance(results, dict) else {}, test if isinstance(test, dict) else {})


def find_runs(root: Path) -> list[Path]:
    """The run directories below `root` (each holds history.jsonl), sorted, each once.

    Symbolic links (such as the store's `latest`) and hidden directories are
    not followed, so no run is found twice.
    """
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not os.path.islink(os.path.join(dirpath, d)))
        if HISTORY_FILE in filenames:
            found.append(Path(dirpath))
    return sorted(found)


def check_tree(root: Path, spark_master: str = "local[*]") -> dict[str, Any]:
    """Check every run below `root` in one Spark job; one row per run.

    Each run gets its results.json as `check_path` writes it; `root` gets
    checks.json and checks.csv with a row per run (see checkers/verdict/table.py).
    A run whose input is malformed gets a row with its one-line error and
    verdict "unknown"; the others are still checked. Returns `{"verdict",
    "valid" (merged over every run), "runs": [row, ...]}`. Raises CheckInputError if
    `root` holds no run at all.
    """
    from kchaos.checkers.verdict.table import write_table

    root = Path(root)
    runs = find_runs(root)
    if not runs:
        raise CheckInputError(f"{root}: no runs ({HISTORY_FILE}) below this directory")
    rows = check_runs(root, runs, spark_master)
    write_table(root, rows)
    return {"verdict": merge([r["verdict"] for r in rows]), "valid": merge_valid(*(r["valid"] for r in rows)),
            "runs": rows}


def check_runs(root: Path, runs: list[Path], spark_master: str = "local[*]") -> list[dict[str, Any]]:
    """Check `runs` (run directories below `root`) in one Spark job; return their rows (checkers/verdict/table.py).

    Each run gets its results.json; a malformed run gets a row with its
    one-line error and verdict "unknown".
    """
    from kchaos.checkers.verdict.table import row

    good: list[tuple[Path, dict[str, Any]]] = []
    errors: dict[Path, str] = {}
    facts: dict[Path, HistoryScan] = {}
    prestart(spark_master)  # the JVM starts while the histories convert
    own: dict[Path, dict[str, Any]] = {}  # runs of workloads with checkers of their own, checked one by one
    for run in runs:
        try:
            test = _load_test(run / TEST_FILE)
            _check_faults(run)
            if workload_kind(test, run / HISTORY_FILE) in WORKLOAD_CHECKERS:
                own[run] = check_path(run, spark_master)
                continue
            facts[run] = scan(run / HISTORY_FILE)
            convert(run / HISTORY_FILE, validate=True)
            good.append((run, test))
        except CheckInputError as e:
            errors[run] = str(e)
    results: dict[Path, dict[str, Any]] = {}
    for name, make in CHECKERS.items():
        checker = make(master=spark_master)
        try:
            many = checker.check_many([(test, run / HISTORY_FILE) for run, test in good])
        except Exception as e:
            many = [{"valid": "unknown", "error": f"{type(e).__name__}: {e}"}] * len(good)
        for (run, _), res in zip(good, many):
            results.setdefault(run, {})[name] = res
    rows = []
    for run in runs:
        if run in errors:
            rows.append(row(root, run, {}, {"valid": "unknown"}, errors[run]))
            continue
        if run in own:
            rows.append(row(root, run, _load_test(run / TEST_FILE), own[run], None))
            continue
        test = dict(good)[run]
        per = results[run]
        composed = {"valid": merge_valid(*(r["valid"] for r in per.values())), **per}
        rows.append(row(root, run, test, _write_result(run / HISTORY_FILE, composed, facts[run], spark_master), None))
    return rows


def _load_test(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        test = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckInputError(f"{path}: unreadable test description ({e})") from None
    if not isinstance(test, dict):
        raise CheckInputError(f"{path}: not a JSON object")
    return test


def _check_faults(run: Path) -> None:
    """CheckInputError unless the run's faults.json, if any, is readable (the queue checker reads it)."""
    try:
        read_faults(run)
    except FaultsError as e:
        raise CheckInputError(str(e)) from None


def _write_json(path: Path, obj: Any) -> None:
    # Write-then-rename so a reader never sees half a results.json.
    tmp = path.with_name(f".{path.name}.tmp")
    # Indented for reading, unless large (a 10M-line run's timeline): the indenting encoder is
    # pure Python, the compact one C, 10x faster.
    text = json.dumps(obj)
    if len(text) < 4 << 20:
        text = json.dumps(obj, indent=2)
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


def validate_history(path: Path) -> None:
    """Raise CheckInputError (one line, naming the line) unless `path` is a readable history.

    Tolerates a truncated final line without newline. Rejects non-JSON lines,
    unknown op types, client ops whose fields have the wrong types (which
    the checker could not use), and completions that complete nothing (no
    outstanding invocation of the same f by that process). Nemesis ops may
    carry anything. Validation is the Parquet conversion (checkers/parquet.py):
    a valid history is left converted beside it.
    """
    convert(Path(path), validate=True)
