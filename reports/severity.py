"""How bad a run or a suite cell looks, for its colour: a level from its verdict and its loss rate.

The words follow the verdict; the colour follows this level. A cell that passed
while losing 97.6% of its writes, all of them allowed, is therefore red and says "pass": never green.
docs/verdicts.md shows the levels.
"""
from __future__ import annotations

from kchaos.checkers.verdict.judge import FAIL, UNKNOWN

LEVELS = ("clean", "unknown", "noted", "serious", "severe")
SERIOUS, SEVERE = 0.01, 0.10  # loss rates (lost / acked) from which a run is serious, severe
# The console's colour of each level (rich styles); the pages use the CSS classes `sev-<level>` (page.html.j2).
RICH = {"clean": "green", "unknown": "yellow", "noted": "yellow", "serious": "dark_orange", "severe": "bold red"}


def loss_rate(lost: int | None, acked: int | None) -> float | None:
    """lost / acked, or None when nothing was acknowledged."""
    return (lost or 0) / acked if acked else None


def level(verdict: str, lost: int | None = 0, acked: int | None = 0, allowed: bool = False) -> str:
    """The severity of a run or cell: "severe" when it fails or lost 10% or more of its acknowledged writes,
    "serious" from 1%, "noted" for any loss or other allowed anomaly, "unknown" for an unknown verdict with
    nothing observed, else "clean" (the only green one)."""
    rate = loss_rate(lost, acked)
    if verdict == FAIL or (rate is not None and rate >= SEVERE) or (lost and not acked):
        return "severe"
    if rate is not None and rate >= SERIOUS:
        return "serious"
    if lost or allowed:
        return "noted"
    return "unknown" if verdict == UNKNOWN else "clean"


def loss_words(lost: int | None, acked: int | None, inside: int | None) -> str | None:
    """The loss in words, or None when nothing acknowledged was lost: `99.5% of acknowledged writes lost (3,951
    of 3,970), outside Kafka's guarantee`; `inside` is how many of them Kafka's guarantee covered (None: not
    judged)."""
    if not lost:
        return None
    rate = loss_rate(lost, acked)
    share = f"{lost:,} acknowledged writes lost" if rate is None else \
        f"{rate * 100:.3g}% of acknowledged writes lost ({lost:,} of {acked:,})"
    if inside is None:
        return share
    if not inside:
        return f"{share}, outside Kafka's guarantee"
    return f"{share}, {'all' if inside == lost else f'{inside:,}'} of them inside Kafka's guarantee"


def verdict_words(verdict: str, lost: int | None, acked: int | None, inside: int | None, allowed: bool) -> str:
    """The verdict word, then its severity in words with what made it so, so that no colour is needed to read it:
    `pass · severe: 99.5% of acknowledged writes lost (3,951 of 3,970), outside Kafka's guarantee`; `pass` alone
    for a clean run."""
    severity = level(verdict, lost, acked, allowed)
    words = loss_words(lost, acked, inside)
    if words is None and acked == 0 and verdict != FAIL:
        words = "nothing was acknowledged"
    if severity in ("clean", "unknown"):
        return f"{verdict} · {words}" if words else verdict
    if words is None:
        words = "anomalies its configuration promises against" if verdict == FAIL else \
            "anomalies its configuration allows"
    return f"{verdict} · {severity}: {words}"


def rich_verdict(verdict: str, severity: str) -> str:
    """The verdict word in rich markup, coloured by `severity`."""
    return f"[{RICH[severity]}]{verdict}[/]"
