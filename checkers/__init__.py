"""Checkers: find the anomalies of a recorded history, judge the run (`kchaos.checkers.verdict`), write results.json.

Which checkers a run gets is its workload's word (`WorkloadKind.checkers`): a checker is
one module implementing core.protocols.Checker (with a constructor taking `master=`, and `check_many` for checking
several runs in one job) plus one line in its workload's list. A workload whose history converts to Parquet (the
queue) has it converted once, validated on the way, and its runs checked many to a Spark job; the others' checkers
read and validate the history themselves.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from kchaos.checkers.compose import checker_error, exit_code, merge_valid, run_checkers
from kchaos.checkers.history_scan import HistoryScan, nemesis_section, scan
from kchaos.checkers.kafka_errors import kafka_errors
from kchaos.checkers.parquet import CheckInputError, convert, parquet_path
from kchaos.checkers.verdict.judge import Judgement, judge, judged, merge
from kchaos.checkers.verdict.promise import Events, classify
from kchaos.checkers.verdict.promise_run import loss_section
from kchaos.core.faults import FaultsError, read_faults
from kchaos.core.promise import Promise
from kchaos.core.workload_kind import KINDS, UnknownWorkload, WorkloadKind, kind_of, name_of
from kchaos.evidence.agreement import agreement
from kchaos.evidence.decode import FindLibs, decode, decode_metadata
from kchaos.evidence.files import EVIDENCE_DIR, RAW_DIR, VIEWS_FILE

log = logging.getLogger(__name__)

HISTORY_FILE = "history.jsonl"
TEST_FILE = "test.json"
RESULTS_FILE = "results.json"
# Copied from the queue checker's result to the top level of results.json.
SUMMARY_KEYS = ("counts", "examples", "loss", "stats", "latency_ms", "timeline")

__all__ = ["CheckInputError", "check_path", "check_runs", "check_tree", "exit_code", "find_runs", "judge",
           "judge_loss", "judge_run", "merge_valid", "run_checkers", "validate_history",
           "workload_of_run"]


def check_path(path: Path, spark_master: str = "local[*]", find_libs: FindLibs | None = None) -> dict[str, Any]:
    """Check a run directory (holding history.jsonl) or a bare history file.

    test.json beside the history is used if present, else `{}` (idempotence
    off). Returns `{"valid", "verdict", "failed", "allowed", "why", "page_cache",
    "undecided", "counts", "examples", "loss", "stats", "latency_ms",
    "timeline", "checkers": {name: full result}}` and writes it as
    results.json beside the history: `verdict` is checkers.verdict.judge's
    word, and `valid` matches it (True pass, False fail, "unknown"). Raises CheckInputError, before
    running any checker, for a missing path, a directory without
    history.jsonl, an unreadable test.json, a faults.json beside the history
    that is unreadable or, when the history has nemesis lines, missing, or a
    malformed history (see `validate_history`). The history is converted to Parquet
    beside it once (`convert`), validated on the way; the checkers
    read that. With `find_libs` (the Kafka jars of a run's test.json), a run
    that lost writes has its evidence decoded (`decode`) before the
    loss is judged, so the KRaft metadata log gives the exact ISR.
    """
    path = Path(path)
    if not path.exists():
        raise CheckInputError(f"{path}: no such file or directory")
    history = path / HISTORY_FILE if path.is_dir() else path
    if not history.is_file():
        raise CheckInputError(f"{path}: no {HISTORY_FILE} in this directory")
    if history.name == HISTORY_FILE:
        from kchaos.core.send_stream import merge_streams  # here: pyarrow's IPC costs start-up in every checker

        merge_streams(history.parent)  # a killed run's producer streams, into its history
    facts = scan(history)
    test = _load_test(history.parent / TEST_FILE)
    _check_faults(history.parent, facts)
    kind = workload_of_run(test, history)
    if kind.parquet:
        _prestart(spark_master)  # the JVM starts while the history converts
        convert(history, validate=True)
    composed = _run_workload_checkers(kind, test, history, spark_master)
    return _write_result(history, kind, composed, facts, spark_master, find_libs)


def workload_of_run(test: Mapping[str, Any], history: Path) -> WorkloadKind:
    """The workload that recorded `history`: test.json's `workload.kind`; without one, the first workload whose
    own ops (`history_ops`) are in the history's first 1000 lines, else the default. CheckInputError for a
    workload kchaos does not know."""
    if "kind" not in (test.get("workload") or {}):
        with open(history, encoding="utf-8", errors="replace") as fh:
            head = [line.replace(" ", "") for _, line in zip(range(1000), fh)]
        for name in KINDS:
            own = kind_of(name)
            if any(f'"f":"{f}"' in line for f in own.history_ops for line in head):
                return own
    try:
        return kind_of(name_of(test))
    except UnknownWorkload as e:
        raise CheckInputError(f"{history.parent / TEST_FILE}: {e}") from None


def _run_workload_checkers(kind: WorkloadKind, test: dict[str, Any], history: Path, spark_master: str = "local[*]"
            ) -> dict[str, Any]:
    """Run a workload's checkers (`run_checkers`) on Spark master `spark_master`. Where the checkers read the
    history itself (not its Parquet, validated while it converted), a CheckInputError (a malformed history)
    propagates: bad input, not an unknown verdict."""
    return run_checkers({name: make(master=spark_master) for name, make in kind.checkers().items()}, test, history,
                        passthrough=() if kind.parquet else (CheckInputError,))


def _write_result(history: Path, kind: WorkloadKind, composed: dict[str, Any], facts: HistoryScan,
                  spark_master: str, find_libs: FindLibs | None = None) -> dict[str, Any]:
    source = composed.get(next(iter(kind.checkers())), {})
    test = _load_test(history.parent / TEST_FILE)
    result: dict[str, Any] = {"valid": composed["valid"]}
    result.update({k: source[k] for k in (*SUMMARY_KEYS, "unseen_undecided", "cycles") if k in source})
    result["history"] = facts.as_json()
    asked = tuple((test.get("nemesis") or {}).get("names") or ())
    result["nemesis"] = nemesis_section(facts, read_faults(history.parent, facts.nemesis), asked)
    if isinstance(test.get("recovery"), dict):
        result["recovery"] = test["recovery"]
    if "loss" in result:
        if find_libs is not None and (result.get("counts") or {}).get("lost"):
            _decode(history.parent, find_libs)
        result["loss"] = {**result["loss"], **judge_loss(history, result)}
    result = kind.amend(history, result)
    result["checkers"] = {k: v for k, v in composed.items() if k != "valid"}
    if (logged := kafka_errors(history.parent, spark_master, history=facts)) is not None:
        result["kafka_errors"] = logged
    if find_libs is not None and (agreed := _agreement(history.parent, test, facts, find_libs)) is not None:
        result["agreement"] = agreed
    # The checkers' merged `valid` counts every anomaly; the run's word also weighs what the configuration allows.
    result = judged(result, test)
    _write_json(history.parent / RESULTS_FILE, result)
    return result


def judge_loss(history: Path, result: dict[str, Any]) -> dict[str, Any]:
    """Kafka's guarantee applied to each lost write of a checked run (`kchaos.checkers.verdict.promise`); the run's
    isr.jsonl and test.json beside `history` are read. Never fails the check: an unreadable input leaves
    every loss inside the promise and says why."""
    test = _load_test(history.parent / TEST_FILE)
    try:
        return loss_section(history.parent, parquet_path(history), test, result)
    except Exception as e:
        out = classify([], Events(), Promise.of(test), int((result.get("counts") or {}).get("lost") or 0))
        return {**out, "error": f"{type(e).__name__}: {e}"}


def _decode(run: Path, find_libs: FindLibs) -> None:
    """Decode the run's evidence (segments and the KRaft metadata log) if it has some; a failure is logged and
    leaves the loss to be judged on the sampled ISR."""
    if not (run / EVIDENCE_DIR / RAW_DIR).is_dir():
        return
    try:
        decode(run, find_libs=find_libs)
    except Exception:
        log.exception("evidence not decoded before judging the loss")


def _agreement(run: Path, test: Mapping[str, Any], facts: HistoryScan, find_libs: FindLibs) -> dict[str, Any] | None:
    """results.json's `agreement` (`kchaos.evidence.agreement`): the brokers' views against the metadata log, and
    the in-sync replicas against each other; None for a run that sampled no views."""
    if not (run / EVIDENCE_DIR / VIEWS_FILE).is_file():
        return None
    meta, notes = decode_metadata(run, find_libs)
    corrupted = {(node, int(c.get("partition", -1))) for op in facts.nemesis
                 if op.get("f") == "corrupt" and op.get("type") == "ok"
                 for node, c in (op.get("corrupted") or {}).items() if isinstance(c, Mapping)}
    topic = (test.get("topic") or {}).get("name") or "kchaos"
    section = agreement(run, meta, topic, corrupted)
    if section is not None and notes:
        section["notes"] = [*notes, *section.get("notes", [])]
    return section


def judge_run(run: Path) -> Judgement:
    """The verdict of a run directory from its results.json and test.json (`judge`), as every surface
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


def check_tree(root: Path, spark_master: str = "local[*]", find_libs: FindLibs | None = None) -> dict[str, Any]:
    """Check every run below `root` in one Spark job; one row per run.

    Each run gets its results.json as `check_path` writes it; `root` gets
    checks.json and checks.csv with a row per run (see `kchaos.checkers.verdict.table`).
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
    rows = check_runs(root, runs, spark_master, find_libs)
    write_table(root, rows)
    return {"verdict": merge([r["verdict"] for r in rows]), "valid": merge_valid(*(r["valid"] for r in rows)),
            "runs": rows}


def check_runs(root: Path, runs: list[Path], spark_master: str = "local[*]", find_libs: FindLibs | None = None
               ) -> list[dict[str, Any]]:
    """Check `runs` (run directories below `root`) in one Spark job; return their rows (`row`).

    Each run gets its results.json; a malformed run gets a row with its
    one-line error and verdict "unknown".
    """
    from kchaos.checkers.verdict.table import row

    good: list[tuple[Path, dict[str, Any]]] = []
    errors: dict[Path, str] = {}
    facts: dict[Path, HistoryScan] = {}
    _prestart(spark_master)  # the JVM starts while the histories convert
    own: dict[Path, dict[str, Any]] = {}  # runs of workloads whose checkers read the history, checked one by one
    kinds: dict[Path, WorkloadKind] = {}
    for run in runs:
        try:
            test = _load_test(run / TEST_FILE)
            facts[run] = scan(run / HISTORY_FILE)
            _check_faults(run, facts[run])
            kinds[run] = kind = workload_of_run(test, run / HISTORY_FILE)
            if not kind.parquet:
                own[run] = check_path(run, spark_master, find_libs)
                continue
            convert(run / HISTORY_FILE, validate=True)
            good.append((run, test))
        except CheckInputError as e:
            errors[run] = str(e)
    results: dict[Path, dict[str, Any]] = {}
    for name, make in {n: m for run, _ in good for n, m in kinds[run].checkers().items()}.items():
        batch = [(run, test) for run, test in good if name in kinds[run].checkers()]
        checker = make(master=spark_master)
        try:
            many = checker.check_many([(test, run / HISTORY_FILE) for run, test in batch])
        except Exception as e:
            log.warning("checker %s failed", name, exc_info=True)
            many = [{"valid": "unknown", "error": checker_error(e)}] * len(batch)
        for (run, _), res in zip(batch, many):
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
        rows.append(row(root, run, test, _write_result(run / HISTORY_FILE, kinds[run], composed, facts[run],
                                                       spark_master, find_libs), None))
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


def _check_faults(run: Path, facts: HistoryScan) -> None:
    """CheckInputError unless faults.json describes the run's nemesis lines (`read_faults`): the checkers read from
    it which nemesis ops are faults (results.json's `nemesis` section, the fault windows), so a verdict never
    weighs faults it cannot tell apart."""
    try:
        read_faults(run, facts.nemesis)
    except FaultsError as e:
        raise CheckInputError(str(e)) from None


_JSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _float(obj: Any) -> float:
    """A float subclass orjson does not know, as the standard library wrote it; anything else is refused."""
    if isinstance(obj, float):
        return float(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _write_json(path: Path, obj: Any) -> None:
    # Write-then-rename so a reader never sees half a results.json.
    tmp = path.with_name(f".{path.name}.tmp")
    # Indented for reading, unless large (a 10M-line run's timeline). orjson: the standard library's indenting
    # encoder is pure Python, a second for a demo run's 3 MB.
    text = orjson.dumps(obj, default=_float, option=_JSON)
    if len(text) < 4 << 20:
        text = orjson.dumps(obj, default=_float, option=_JSON | orjson.OPT_INDENT_2)
    tmp.write_bytes(text + b"\n")
    os.replace(tmp, path)


def validate_history(path: Path) -> None:
    """Raise CheckInputError (one line, naming the line) unless `path` is a readable history.

    Tolerates a truncated final line without newline. Rejects non-JSON lines,
    unknown op types, client ops whose fields have the wrong types (which
    the checker could not use), and completions that complete nothing (no
    outstanding invocation of the same f by that process). Nemesis ops may
    carry anything. Validation is the Parquet conversion (`convert`):
    a valid history is left converted beside it.
    """
    convert(Path(path), validate=True)


def _prestart(spark_master: str) -> None:
    # Imported here: pyspark takes a fifth of a second to import, which a command that has its run checked
    # elsewhere (a warm `kchaos check`) or not at all should not pay.
    from kchaos.checkers.spark import prestart
    prestart(spark_master)
