"""What a run's configuration promises, as the run report and the comparison say it. Whether a run kept it is
part of its verdict (checkers/verdict/judge.py).

No loss: Kafka's documented guarantee, which covers acks=all without unclean
leader election, write by write: a lost write breaks it only if some replica
of the partition's ISR held it at every moment after its acknowledgement
(checkers/verdict/promise.py decides that from the run and puts the counts in
results.json's `loss`). min.insync.replicas is not part of the guarantee.
No duplicates: idempotence on.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kchaos.checkers.queue.reference import Settings
from kchaos.checkers.verdict.promise import GUARANTEE
from kchaos.checkers.verdict.promise_run import rules_of

RULE = GUARANTEE


@dataclass(frozen=True)
class Promise:
    """`no_loss` and `no_duplicates` promised; `void` says why a configuration promises no durability."""

    no_loss: bool
    no_duplicates: bool
    void: str | None = None

    @property
    def text(self) -> str:
        """"no loss", "no duplicates", both joined by "and", or "none" (with the reason when void)."""
        kinds = [k for k, on in (("no loss", self.no_loss), ("no duplicates", self.no_duplicates)) if on]
        return " and ".join(kinds) or (f"none: {self.void}" if self.void else "none")


def promise_of(test: Mapping[str, Any]) -> Promise:
    """The promise of the configuration in `test` (a test.json object)."""
    rules = rules_of(test)
    # acks=0/1 simply promise nothing (an acknowledgement is not a commit); unclean election gives it up
    void = "unclean leader election is configured" if rules.unclean and rules.acks in ("all", "-1") else None
    return Promise(rules.promises, bool(Settings.of(dict(test)).idempotence), void)
