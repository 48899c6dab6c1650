"""A suite split over several machines: `kchaos suite FILE --shard I/N` runs shard I of N.

The suite's repetitions, in the order a whole run takes them (each cell's
repetitions in turn, cells in file order), are dealt out like cards: the
repetition at place k (from 0) belongs to shard k mod N + 1. So the shards
are as even as the suite allows, whatever its cells and repeat, and every
repetition runs in exactly one shard, with the seed a whole run gives it
(the suite's seed must be fixed for that: the file's, or `--seed`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kchaos.harness.suites.suite import Cell, Suite, SuiteError

SHAPE = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `of` (1-based); the default, 1 of 1, is the whole suite."""

    index: int = 1
    of: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N` with 1 <= I <= N; SuiteError (one line) otherwise."""
        m = SHAPE.fullmatch(text.strip())
        if not m:
            raise SuiteError(f"--shard {text}: give it as I/N, shard I of N, e.g. 1/2")
        index, of = int(m[1]), int(m[2])
        if not 1 <= index <= of:
            raise SuiteError(f"--shard {text}: I must be between 1 and N")
        return cls(index, of)

    @property
    def whole(self) -> bool:
        """Whether this is the whole suite (1/1)."""
        return self.of == 1

    def owns(self, place: int) -> bool:
        """Whether the repetition at `place` (from 0) in the whole suite's order is this shard's."""
        return place % self.of == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.of}"


WHOLE = Shard()


def require_seed(shard: Shard, seed: int | None) -> None:
    """SuiteError unless the suite seed of a shard is fixed: each shard must give a run the seed a whole run would."""
    if seed is None and not shard.whole:
        raise SuiteError(f"--shard {shard} needs the suite's seed fixed, so that each shard gives a run the seed a "
                         "whole run would: set seed: in the file, or give --seed")


def share(suite: Suite, shard: Shard) -> list[tuple[int, Cell, int]]:
    """The repetitions of `suite` that `shard` runs, as (place in the whole suite's order, cell, repetition)."""
    places = [(cell, rep) for cell in suite.cells for rep in range(suite.repeat)]
    return [(k, cell, rep) for k, (cell, rep) in enumerate(places) if shard.owns(k)]


def of_night(state: dict[str, Any]) -> Shard:
    """The shard a suite night ran, from its suite.json (WHOLE for a night that ran the whole suite)."""
    return Shard.parse(state["shard"]) if state.get("shard") else WHOLE
