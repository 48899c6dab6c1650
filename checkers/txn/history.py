"""A txn workload history read and validated (docs/history.md, "The txn workload"): transactions, final reads,
rebalances. Line by line in `LineParser`; here, a whole file, with errors naming the file and line."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kchaos.checkers.parquet import CheckInputError
from kchaos.checkers.txn.lines import BadLine, LineParser, Parsed, Txn

__all__ = ["Parsed", "Txn", "parse", "parse_ops"]


def parse(history: Path) -> Parsed:
    """Read a txn history.jsonl; CheckInputError `path:line: why` for the first line the checker cannot use.
    A truncated last line without a newline (a killed run's tail) is skipped."""
    text = history.read_text(encoding="utf-8")
    lines = text.split("\n")
    return parse_ops(_load(history, lines, text.endswith("\n")), where=str(history))


def _load(history: Path, lines: list[str], ended: bool) -> Iterable[tuple[int, Any]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines) and not ended:
                return
            raise CheckInputError(f"{history}:{n}: not JSON ({e.msg})") from None


def parse_ops(ops: Iterable[tuple[int, Any]], where: str = "history") -> Parsed:
    """Parse `(line number, op)` pairs in history order; CheckInputError `where:line: why` for the first line
    the checker cannot use."""
    parser = LineParser()
    try:
        for n, op in ops:
            parser.feed(n, op)
    except BadLine as e:
        raise CheckInputError(f"{where}:{e.n}: {e.why}") from None
    return parser.finish()
