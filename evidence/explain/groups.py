"""Lost ranges grouped by cause: the unit a person reads.

Two lost ranges (`LostRange`s) share a cause, and fall in
one group, when they are of the same partition, were acknowledged by the same
leader in the same leader epoch, and each replica's fate is the same (the
status per node: truncated, did not hold, ...), contiguous or not.

A split brain is one group: where different leaders acknowledged the same
offsets of a partition and both lost them (an isolated acks=1 leader and its
replacement, each acknowledging from the same log end; or writes whose
acknowledging leader is ambiguous between them), their ranges join, "by both
n3 (...) and n1 (...)", even where a replica's fate differs between them; the
sentence and the table then give each status's share.

Groups come largest first (most values). Each has its ranges' offsets and
value count, its replicas' merged fates (for the report's table) and one
sentence in three parts (`why_parts`).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kchaos.evidence.explain.why import why_parts

if TYPE_CHECKING:
    from kchaos.evidence.explain.fates import LostRange

__all__ = ["LostGroup", "group_ranges"]

_MAX_SAID = 3  # distinct log ends, times and details kept per replica in a group's table


@dataclass(frozen=True)
class LostGroup:
    """Lost ranges of one partition with one cause (see the module docstring), told in one sentence.

    `ranges` are indices into the explanation's ranges, in offset order;
    `spans` their first and last offsets; `values` how many lost values they
    hold; `acked_by` the leaders that acknowledged them (or that may have,
    when it is ambiguous); `replicas` one row per replica with its status and
    what the ranges' evidence says, merged; `parts` the sentence's three
    parts (what and who, what happened, each replica's fate) and `why` the
    sentence.
    """

    partition: int
    ranges: tuple[int, ...]
    spans: tuple[tuple[int | None, int | None], ...]
    values: int
    acked_by: tuple[str, ...]
    leader_epochs: tuple[int, ...]
    acked_from_s: float | None
    acked_to_s: float | None
    replicas: tuple[dict[str, Any], ...]
    parts: tuple[str, ...]
    why: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (explanation.json's `groups[]`)."""
        return {"partition": self.partition, "ranges": list(self.ranges), "spans": [list(s) for s in self.spans],
                "values": self.values, "acked_by": list(self.acked_by), "leader_epochs": list(self.leader_epochs),
                "acked_from_s": self.acked_from_s, "acked_to_s": self.acked_to_s,
                "replicas": [dict(r) for r in self.replicas], "parts": list(self.parts), "why": self.why}


def _who(r: LostRange) -> Hashable:
    """Who acknowledged a range: (leader, epoch), or the leaders it is ambiguous between."""
    if r.leader is not None:
        return ("leader", r.leader, r.leader_epoch)
    return ("ambiguous", tuple(r.candidates)) if r.candidates else ("none", r.leader_epoch)


def _causes(ranges: Sequence[LostRange]) -> list[int]:
    """Per range, the index of the first range of its group: ranges join when they share partition, who and
    fates, or when different leaders acknowledged overlapping offsets of one partition (a split brain)."""
    parent = list(range(len(ranges)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        ri, rj = root(i), root(j)
        parent[max(ri, rj)] = min(ri, rj)
    first: dict[Hashable, int] = {}
    for i, r in enumerate(ranges):
        join(i, first.setdefault((r.partition, _who(r), tuple((f.node, f.status) for f in r.replicas)), i))
    by_partition: dict[int, list[int]] = {}
    for i, r in enumerate(ranges):
        if r.first_offset is not None and r.last_offset is not None:
            by_partition.setdefault(r.partition, []).append(i)
    for idx in by_partition.values():
        reach: list[int] = []  # earlier ranges that reach the current first offset
        for i in sorted(idx, key=lambda i: ranges[i].first_offset or 0):
            reach = [j for j in reach if (ranges[j].last_offset or 0) >= (ranges[i].first_offset or 0)]
            for j in reach:
                if _who(ranges[j]) != _who(ranges[i]):
                    join(i, j)
            reach.append(i)
    return [root(i) for i in range(len(ranges))]


def _replicas(members: Sequence[LostRange]) -> tuple[dict[str, Any], ...]:
    """One row per replica: its status (values per status: several only in a split brain's group), the values
    it still holds, and the distinct log ends / truncation offsets, times, sources and details the members'
    evidence gives (a few of each)."""
    rows: dict[str, dict[str, Any]] = {}
    for r in members:
        for f in r.replicas:
            row = rows.setdefault(f.node, {"node": f.node, "statuses": {}, "held": 0, "offsets": [], "times": [],
                                           "sources": [], "details": []})
            row["statuses"][f.status] = row["statuses"].get(f.status, 0) + len(r.values)
            row["held"] += f.held
            for key, v in (("offsets", f.offset), ("times", f.time_s), ("sources", f.source),
                           ("details", f.had), ("details", f.detail)):
                if v is not None and v not in row[key] and len(row[key]) < _MAX_SAID:
                    row[key].append(v)
    return tuple(rows.values())


def group_ranges(ranges: Sequence[LostRange]) -> tuple[LostGroup, ...]:
    """The groups of `ranges` (see the module docstring), largest first."""
    members: dict[int, list[int]] = {}
    for i, c in enumerate(_causes(ranges)):
        members.setdefault(c, []).append(i)
    groups = []
    for idx in members.values():
        idx.sort(key=lambda i: (ranges[i].first_offset is None, ranges[i].first_offset or 0))
        rs = [ranges[i] for i in idx]
        from_s = [r.acked_from_s for r in rs if r.acked_from_s is not None]
        to_s = [r.acked_to_s for r in rs if r.acked_to_s is not None]
        by = sorted({r.leader for r in rs if r.leader} | {c for r in rs if not r.leader for c in r.candidates})
        parts = tuple(why_parts(rs))
        groups.append(LostGroup(rs[0].partition, tuple(idx), tuple((r.first_offset, r.last_offset) for r in rs),
                                sum(len(r.values) for r in rs), tuple(by),
                                tuple(sorted({r.leader_epoch for r in rs if r.leader_epoch is not None})),
                                min(from_s, default=None), max(to_s, default=None), _replicas(rs), parts,
                                "; ".join(parts) + "."))
    return tuple(sorted(groups, key=lambda g: (-g.values, g.partition, g.spans[0][0] is None, g.spans[0][0] or 0)))
