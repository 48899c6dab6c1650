"""Running several checkers over one history and merging their verdicts."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kchaos.core.protocols import Checker, Valid

VALIDS: tuple[Valid, ...] = (True, False, "unknown")


log = logging.getLogger(__name__)

def _is_valid(v: object) -> bool:
    # Identity, not equality: 1 == True and 0 == False must not pass as verdicts.
    return v is True or v is False or v == "unknown"


def merge_valid(*vs: Valid) -> Valid:
    """False if any is False, else "unknown" if any is "unknown", else True (also for none).

    Raises ValueError for anything other than True, False or "unknown".
    """
    for v in vs:
        if not _is_valid(v):
            raise ValueError(f"not a verdict: {v!r} (expected True, False or 'unknown')")
    if any(v is False for v in vs):
        return False
    if any(v == "unknown" for v in vs):
        return "unknown"
    return True


def run_checkers(checkers: Mapping[str, Checker], test: dict[str, Any],
                 history_path: Path, passthrough: tuple[type[Exception], ...] = ()) -> dict[str, Any]:
    """Run every checker in order; return `{"valid": merged, <name>: result, ...}`.

    A checker that raises (any Exception but those of `passthrough`, which
    propagate) or returns something without a proper `valid` contributes
    `{"valid": "unknown", "error": "<ExcType>: msg"}` instead; the others still run.
    """
    out: dict[str, Any] = {}
    for name, checker in checkers.items():
        try:
            result = checker.check(test, history_path)
            if not isinstance(result, dict) or not _is_valid(result.get("valid")):
                raise TypeError(f"checker returned no valid verdict: {result!r:.200}")
        except passthrough:
            raise
        except Exception as e:
            log.warning("checker %s failed", name, exc_info=True)
            result = {"valid": "unknown", "error": checker_error(e)}
        out[name] = result
    return {"valid": merge_valid(*(r["valid"] for r in out.values())), **out}


def checker_error(e: BaseException) -> str:
    """What a checker raised, for results.json and the verdict's reasons: `<ExcType>: msg`, except that an error
    inside a Spark task (the JVM's exception carrying the Python worker's traceback and its own stack) is told by
    the task's own exception, the traceback's last line (the whole text is in harness.log)."""
    text = str(e)
    _, sep, tail = text.rpartition("Traceback (most recent call last):")
    if sep:
        body = tail.split("\n\tat ", 1)[0]
        last = [line.strip() for line in body.splitlines()
                if line.strip() and not line.startswith((" ", "\t")) and not line.strip().startswith("SQLSTATE")]
        if last:
            return f"{type(e).__name__} in a Spark task: {last[-1]}"
    return f"{type(e).__name__}: {text}"


def exit_code(valid: Valid | str) -> int:
    """The CLI exit status for a verdict or the `valid` matching it: pass or True -> 0,
    fail or False -> 1, unknown -> 2.

    (3, bad input, is decided before any checker runs.) Raises ValueError otherwise.
    """
    if valid is True or valid == "pass":
        return 0
    if valid is False or valid == "fail":
        return 1
    if valid == "unknown":
        return 2
    raise ValueError(f"not a verdict: {valid!r}")
