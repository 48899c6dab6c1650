"""What a run's configuration promises, judged the same way by the run report, the comparison and JUnit.

No loss: acks=all, min.insync.replicas >= 2 and no unclean leader election,
as long as an in-sync replica survives with its data; so not when every node
loses power at once (Kafka does not fsync). No duplicates: idempotence on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from checkers.reference import Settings
from nemesis import powers_off_every_replica

RULE = ("acks=all, min.insync.replicas >= 2, no unclean election (by config or by request), "
        "and not every node losing power at once (unless flush.messages=1)")


@dataclass(frozen=True)
class Promise:
    """`no_loss` and `no_duplicates` promised; `void` says why a no-loss configuration promises nothing here."""

    no_loss: bool
    no_duplicates: bool
    void: str | None = None

    @property
    def text(self) -> str:
        """"no loss", "no duplicates", both joined by "and", or "none" (with the reason when void)."""
        kinds = [k for k, on in (("no loss", self.no_loss), ("no duplicates", self.no_duplicates)) if on]
        return " and ".join(kinds) or (f"none: {self.void}" if self.void else "none")

    def broken(self, counts: Mapping[str, Any]) -> bool:
        """Whether `counts` (summed over runs) show a promise broken."""
        return bool((self.no_loss and counts.get("lost")) or (self.no_duplicates and counts.get("duplicate")))


def promise_of(test: Mapping[str, Any]) -> Promise:
    """The promise of the configuration in `test` (a test.json object)."""
    s = Settings.of(dict(test))
    names = (test.get("nemesis") or {}).get("names") or ()
    # flush.messages=1 fsyncs every record before the leader answers: power loss then takes nothing acknowledged.
    flushed = (test.get("topic") or {}).get("flush_messages") == 1
    powered_off = powers_off_every_replica(tuple(names)) and not flushed
    # an operator's unclean election (the elect-unclean nemesis) gives up the promise as the config would
    elected = any(str(n).partition(":")[0] == "elect-unclean" for n in names)
    void = ("every replica loses power" if powered_off else "an unclean election is requested" if elected
            else None) if s.promises_no_loss else None
    return Promise(s.promises_no_loss and not powered_off and not elected, bool(s.idempotence), void)
