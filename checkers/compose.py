"""Running several checkers over one history and merging their verdicts."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kchaos.core.protocols import Checker, Valid

VALIDS: tuple[Valid, ...] = (True, False, "unknown")


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
            result = {"valid": "unknown", "error": f"{type(e).__name__}: {e}"}
        out[name] = result
    return {"valid": merge_valid(*(r["valid"] for r in out.values())), **out}


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
