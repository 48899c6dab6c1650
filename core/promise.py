"""What a run's configuration promises, read from its test.json: the one place that decides it.

The verdict, the explanations of lost writes and the reports ask `Promise.of(test)`.
Whether a lost write broke the promise is decided write by write in `kchaos.checkers.verdict.promise`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kchaos.core.config import ProducerConfig, TopicConfig
from kchaos.core.kafka_versions import DEFAULT as DEFAULT_KAFKA
from kchaos.core.kafka_versions import release_key

__all__ = ["Promise"]


@dataclass(frozen=True)
class Promise:
    """What a run's configuration promises: the one place that decides it. The verdict and the reports ask it.

    No loss: Kafka's documented guarantee covers acks=all (or -1) without unclean leader election; whether a lost
    write broke it is decided write by write. min.insync.replicas is not part of the guarantee, but decides when
    Eligible Leader Replicas (`elr`) keep a replica that left the ISR counting.
    No duplicates: idempotence on.
    """

    acks: str = ProducerConfig.acks
    idempotence: bool = ProducerConfig.idempotence
    min_insync: int = TopicConfig.min_insync
    unclean: bool = TopicConfig.unclean
    elr: bool = False

    @classmethod
    def of(cls, test: Mapping[str, Any] | None) -> Promise:
        """The promise of the configuration in `test` (a test.json object); a setting it lacks takes the
        configuration's default. ELR: Kafka 4.1 and later enable it on new clusters (kchaos formats a new
        cluster for every run)."""
        test = test or {}
        producer, topic = test.get("producer") or {}, test.get("topic") or {}
        version = str((test.get("versions") or {}).get("kafka") or (test.get("cluster") or {}).get("kafka_version")
                      or DEFAULT_KAFKA)
        min_insync = topic.get("min_insync", cls.min_insync)
        return cls(acks=str(producer.get("acks", cls.acks)),
                   idempotence=producer.get("idempotence", cls.idempotence) is True,
                   min_insync=min_insync if isinstance(min_insync, int) else cls.min_insync,
                   unclean=topic.get("unclean", cls.unclean) is not False,
                   elr=release_key(version) >= (4, 1))

    @property
    def acks_all(self) -> bool:
        """Whether a write is acknowledged only once every in-sync replica has it: acks=all (or -1)."""
        return self.acks in ("all", "-1")

    @property
    def no_loss(self) -> bool:
        """Whether Kafka's guarantee covers this configuration at all: acks=all and unclean election off."""
        return self.acks_all and not self.unclean

    @property
    def no_duplicates(self) -> bool:
        """Whether the configuration promises no duplicates: idempotence on."""
        return self.idempotence

    @property
    def not_covered(self) -> str | None:
        """Why Kafka's guarantee does not cover the configuration, or None when it does."""
        if not self.acks_all:
            return "acks=1 or 0: an acknowledgement is not a commit"
        return "unclean leader election is configured" if self.unclean else None

    @property
    def no_durability(self) -> str | None:
        """Why the configuration promises no durability, as a verdict says it; None when it promises no loss."""
        if not self.acks_all:
            return f"acks={self.acks} promises no durability"
        return "unclean leader election is configured: Kafka's guarantee does not apply" if self.unclean else None

    @property
    def text(self) -> str:
        """"no loss", "no duplicates", both joined by "and", or "none" (with the reason where acks=all promises
        nothing: acks=0/1 simply promise nothing)."""
        kinds = [k for k, on in (("no loss", self.no_loss), ("no duplicates", self.no_duplicates)) if on]
        return " and ".join(kinds) or (f"none: {self.not_covered}" if self.acks_all and self.not_covered else "none")
