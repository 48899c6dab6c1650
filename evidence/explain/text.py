"""The groups of a run's lost writes, from an explanation in its JSON form (explanation.json, or
`Explanation.to_dict()`), for report.html and the console; and the lines the console prints about them.

"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kchaos.core.lines import LINE_WIDTH, short_lines

__all__ = ["MAX_CONSOLE_GROUPS", "console_lines", "explain_lines", "groups_of", "prefixed"]

MAX_CONSOLE_GROUPS = 5
_WHY = "why: "


def prefixed(parts: list[str], first: str, rest: str | None = None, width: int = LINE_WIDTH) -> list[str]:
    """Each of `parts` on short lines of its own (`short_lines`), the first line after `first`, every other
    after `rest` (default: spaces as wide as `first`)."""
    rest = " " * len(first) if rest is None else rest
    lines = [line for part in parts for line in short_lines(part, width - max(len(first), len(rest)))]
    return [(rest if i else first) + line for i, line in enumerate(lines)]


def groups_of(explanation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The explanation's groups, largest first (none when it has none)."""
    groups = explanation.get("groups")
    return groups if isinstance(groups, list) else []


def console_lines(explanation: Mapping[str, Any], run: Path | str, limit: int = MAX_CONSOLE_GROUPS) -> list[str]:
    """What a run's console says about its lost writes: the `limit` largest groups, each on at most three lines
    ("why: " what was lost and who acknowledged it; what happened; each replica's fate), then, when there are
    more, one line naming them and where to read them. Nothing when no lost write was placed."""
    groups = groups_of(explanation)
    lines = []
    for g in groups[:limit]:
        parts = [p for p in g.get("parts") or [g.get("why", "")] if p][:3]
        if not parts:
            continue
        parts[-1] = parts[-1].rstrip(".") + "."
        lines += prefixed(parts, _WHY)
    rest = len(groups) - min(limit, len(groups))
    if rest:
        values = sum(g.get("values") or 0 for g in groups[limit:])
        lines.append(f"… {rest} more group{'s' if rest != 1 else ''} ({values:,} values): kchaos explain {run}")
    return lines


def explain_lines(explanation: Mapping[str, Any], all_ranges: bool = False) -> list[str]:
    """What `kchaos explain` prints: one sentence per group, largest first; with `all_ranges`, one sentence per
    lost range instead (offset order), as explanation.json's `why` has them. Each sentence is said in short lines
    (`short_lines`: "why: ", then the rest indented); a blank line parts two sentences."""
    if all_ranges:
        sentences = [[r.get("why") or ""] for r in explanation.get("ranges") or []]
    else:
        sentences = [[p for p in g.get("parts") or [g.get("why") or ""] if p] for g in groups_of(explanation)]
    lines: list[str] = []
    for parts in sentences:
        if parts:
            parts[-1] = parts[-1].rstrip(".") + "."
            lines += ([""] if lines else []) + prefixed(parts, _WHY)
    return lines
