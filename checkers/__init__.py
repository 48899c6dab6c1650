"""Checkers: decide whether a recorded history is valid, and write results.json.

A new checker is one module implementing harness.protocols.Checker (with a
constructor taking `master=`) plus one line in CHECKERS.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from harness.history import HistoryError, read_history
from harness.protocols import Checker
from checkers.compose import exit_code, merge_valid, run_checkers
from checkers.queue import QueueChecker

CHECKERS: dict[str, Callable[..., Checker]] = {
    "queue": QueueChecker,
}

HISTORY_FILE = "history.jsonl"
TEST_FILE = "test.json"
RESULTS_FILE = "results.json"
# Copied from the queue checker's result to the top level of results.json.
SUMMARY_KEYS = ("counts", "examples", "stats", "latency_ms")

__all__ = ["CHECKERS", "CheckInputError", "QueueChecker", "check_path", "exit_code",
           "merge_valid", "run_checkers", "validate_history"]


class CheckInputError(ValueError):
    """The thing to check is missing or malformed; the message is one line naming it."""


def check_path(path: Path, spark_master: str = "local[*]") -> dict[str, Any]:
    """Check a run directory (holding history.jsonl) or a bare history file.

    test.json beside the history is used if present, else `{}` (idempotence
    off). Returns `{"valid", "counts", "examples", "stats", "latency_ms",
    "checkers": {name: full result}}` and writes it as results.json beside the
    history. Raises CheckInputError, before running any checker, for a missing
    path, a directory without history.jsonl, an unreadable test.json or a
    malformed history (see `validate_history`).
    """
    path = Path(path)
    if not path.exists():
        raise CheckInputError(f"{path}: no such file or directory")
    history = path / HISTORY_FILE if path.is_dir() else path
    if not history.is_file():
        raise CheckInputError(f"{path}: no {HISTORY_FILE} in this directory")
    test = _load_test(history.parent / TEST_FILE)
    validate_history(history)
    checkers = {name: make(master=spark_master) for name, make in CHECKERS.items()}
    composed = run_checkers(checkers, test, history)
    queue = composed.get("queue", {})
    result: dict[str, Any] = {"valid": composed["valid"]}
    result.update({k: queue[k] for k in SUMMARY_KEYS if k in queue})
    result["checkers"] = {k: v for k, v in composed.items() if k != "valid"}
    _write_json(history.parent / RESULTS_FILE, result)
    return result


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


def _write_json(path: Path, obj: Any) -> None:
    # Write-then-rename so a reader never sees half a results.json.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _client_op_problem(rec: dict[str, Any]) -> str | None:
    """What is wrong with client op `rec` for the queue checker, or None."""
    f, type_ = rec["f"], rec["type"]
    for key in ("partition", "offset"):
        if rec.get(key) is not None and not _int(rec[key]):
            return f"{key} must be an integer, got {rec[key]!r}"
    if f == "send" and not _int(rec.get("value")) and (type_ == "invoke" or "value" in rec):
        return f"send value must be an integer, got {rec.get('value')!r}"
    if type_ == "ok" and f in ("poll", "drain"):
        records = rec.get("records")
        if not isinstance(records, list):
            return f"ok {f} needs a records list, got {records!r:.80}"
        for r in records:
            if not (isinstance(r, list) and len(r) == 3 and all(_int(x) for x in r)):
                return f"record {r!r:.80} is not [partition, offset, value]"
    if "complete" in rec and not isinstance(rec["complete"], bool):
        return f"complete must be true or false, got {rec['complete']!r}"
    return None


def _pairing_problem(rec: dict[str, Any], outstanding: dict[Any, str]) -> str | None:
    """Track invocations per process; say what is wrong if `rec` completes nothing."""
    proc, f = rec["process"], rec["f"]
    if rec["type"] == "invoke":
        outstanding[proc] = f
        return None
    if outstanding.pop(proc, None) != f:
        return f"{rec['type']} {f} of process {proc} completes no invocation (no {f} of that process is outstanding)"
    return None


def validate_history(path: Path) -> None:
    """Raise CheckInputError (one line, naming the line) unless `path` is a readable history.

    Tolerates a truncated final line without newline. Rejects non-JSON lines,
    unknown op types, client ops whose fields have the wrong types (which
    the checker could not use), and completions that complete nothing (no
    outstanding invocation of the same f by that process). Nemesis ops may
    carry anything.
    """
    outstanding: dict[Any, str] = {}  # process -> f of its invocation awaiting completion
    try:
        for n, rec in enumerate(read_history(path), 1):
            if rec["process"] == "nemesis":
                continue
            problem = _client_op_problem(rec) or _pairing_problem(rec, outstanding)
            if problem:
                # `index` is the 0-based line number; fall back to the record's position.
                where = rec["index"] + 1 if _int(rec.get("index")) else f"record {n}"
                raise CheckInputError(f"{path}:{where}: {problem}")
    except HistoryError as e:
        raise CheckInputError(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise CheckInputError(f"{path}: unreadable ({e})") from None
