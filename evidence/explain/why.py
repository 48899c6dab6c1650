"""How lost writes are told: one sentence for a lost range, or for several ranges that share one cause.

`why_parts(ranges)` tells what a list of lost ranges (`LostRange`s of
one partition) have in common, in three parts:

1. what was lost and who acknowledged it: "offsets 0-195, 300-410 and 12
   more ranges of p0 (1,204 values) were acknowledged 11.5 s–14.7 s by n1 in
   leader epoch 0 while ISR = {n1,n2,n3}"; several leaders (a split brain)
   are named together: "by both n2 (...) and n3 (...)";
2. what happened to them: the faults, then the election that replaced them;
3. each replica's fate: truncations, unsynced tails lost to a power failure,
   replicas that did not hold them, who still holds them, what is unknown.

`why(ranges)` joins them into the sentence explanation.json and `kchaos
explain` give. For one range the sentence is the range's own. Only the
ranges' recorded facts are used; nothing is re-read.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kchaos.evidence.explain.fates import LostRange, ReplicaFate

__all__ = ["MAX_FAULTS", "MAX_SPANS", "on_disk", "pick_faults", "spans_phrase", "why", "why_parts"]

T = TypeVar("T")

MAX_FAULTS = 6
MAX_SPANS = 3  # offset ranges named in a sentence; the others are counted
_MAX_SAME = 3  # truncations (or log ends) of one kind named before "and N more"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _s(x: float | None) -> str:
    return "unknown time" if x is None else f"{x:.1f} s"


def _fmt_set(nodes: Iterable[str] | None) -> str:
    return "unknown" if nodes is None else "{" + ",".join(nodes) + "}"


def _span(lo: int | None, hi: int | None) -> str:
    return "unknown" if lo is None else str(lo) if lo == hi else f"{lo}-{hi}"


def spans_phrase(spans: Sequence[tuple[int | None, int | None]]) -> str:
    """The offsets of some ranges, overlapping or adjacent ones merged: "offset 5", "offsets 0-7",
    "offsets 0-195, 300-410 and 12 more ranges"."""
    known: list[tuple[int, int]] = []
    for lo, hi in sorted((lo, hi if hi is not None else lo) for lo, hi in spans if lo is not None):
        if known and lo <= known[-1][1] + 1:  # overlapping (a split brain's) or adjacent: one run of offsets
            known[-1] = (known[-1][0], max(known[-1][1], hi))
        else:
            known.append((lo, hi))
    unknown = len(spans) - sum(1 for lo, _ in spans if lo is not None)
    if not known:
        return "offsets unknown"
    if len(known) == 1 and not unknown:
        lo, hi = known[0]
        return f"offset {lo}" if lo == hi else f"offsets {lo}-{hi}"
    named = [_span(lo, hi) for lo, hi in known[:MAX_SPANS if len(known) <= MAX_SPANS else MAX_SPANS - 1]]
    rest = len(known) - len(named)
    if rest:
        named.append(f"{rest} more range{'s' if rest != 1 else ''}")
    if unknown:
        named.append(f"{unknown} range{'s' if unknown != 1 else ''} of unknown offsets")
    return "offsets " + _and(named)


def pick_faults(found: Iterable[dict[str, Any]], fates: Iterable[ReplicaFate]) -> list[dict[str, Any]]:
    """The faults worth a clause: faults, not mends; the power failures that cost a replica the range
    always; then the earliest others, MAX_FAULTS in all, in time order."""
    faults = sorted((f for f in found if f["role"] == "fault"), key=lambda f: f["time_s"])
    must = {f.time_s for f in fates if f.status == "lost-unsynced"}
    chosen = [f for f in faults if f["f"] == "power-fail" and f["time_s"] in must]
    for f in faults:
        if len(chosen) >= MAX_FAULTS:
            break
        if f not in chosen:
            chosen.append(f)
    return sorted(chosen, key=lambda f: f["time_s"])


def on_disk(fault: dict[str, Any], p: int, last_ack_s: float | None,
            lost_at: dict[str, float] | None = None) -> str:
    """For a power failure with lazyfs's per-file report: which of its nodes kept the range on disk (written
    back before the failure), as " (n3 kept them: p0's log was on disk up to 31.2 s)"; else "". A node that had
    already lost the range (`lost_at`: node -> the time of the power failure that took it) keeps nothing."""
    since = fault.get("dropped_since") or {}
    kept = []
    for node in fault["nodes"]:
        if (lost_at or {}).get(node, float("inf")) < fault["time_s"]:
            continue  # gone in an earlier failure: an empty log has nothing unsynced, and nothing to keep
        if node in since and last_ack_s is not None:
            t = since[node].get(p)
            if t is None:
                kept.append(f"{node} kept them: its p{p} log had nothing unsynced")
            elif last_ack_s < t:
                kept.append(f"{node} kept them: its p{p} log was on disk up to {_s(t)}")
    return f" ({'; '.join(kept)})" if kept else ""


def _distinct(items: Iterable[T | None]) -> list[T]:
    out: list[T] = []
    for x in items:
        if x is not None and x not in out:
            out.append(x)
    return out


def _acked(rs: Sequence[LostRange], head: str, were: str, when: str) -> str:
    """Part 1: who acknowledged them. Ranges are in time order."""
    ackers = _distinct((r.leader, r.leader_epoch) for r in rs if r.leader is not None)
    vague = [r for r in rs if r.leader is None and len(r.candidates) > 1]
    cands = _distinct(c for r in vague for c in r.candidates)
    if not ackers and cands:
        return (f"{head} {were} acknowledged {when} by {' or '.join(cands)}, which all believed they led "
                "the partition then (which one is unknown)")
    if not ackers:
        return f"{head} {were} acknowledged {when}, when the metadata log shows no leader (unknown)"

    def by(leader: str, epoch: int | None, alone: bool) -> str:
        mine = [r for r in rs if (r.leader, r.leader_epoch) == (leader, epoch)]
        isrs = " then ".join(_fmt_set(i) for i in _distinct(r.isr for r in mine)) or "unknown"
        newer = next((r.controller_moved_on for r in mine if r.controller_moved_on), None)
        if not alone:
            return (f"{leader} (leader epoch {epoch}, ISR = {isrs}" + (
                f", not knowing that from {_s(newer['time_s'])} the controller had made {newer['leader']} leader "
                f"with epoch {newer['epoch']}" if newer else "") + ")")
        said = f"{leader} in leader epoch {epoch} while ISR = {isrs}"
        if newer:
            said += (f" as {leader} knew it (from {_s(newer['time_s'])} on, the controller had made "
                     f"{newer['leader']} leader with epoch {newer['epoch']}; {leader} did not know)")
        return said
    if len(ackers) == 1 and not vague:
        return f"{head} {were} acknowledged {when} by {by(*ackers[0], True)}"
    names = _distinct([leader for leader, _ in ackers] + cands)
    both = "both " if len(names) == 2 and len(ackers) == 2 else ""
    out = f"{head} {were} acknowledged {when} by {both}{_and([by(leader, e, False) for leader, e in ackers])}"
    if vague:
        k = sum(len(r.values) for r in vague)
        out += (f", {k:,} of them by {' or '.join(cands)}, which all believed they led the partition then "
                "(which one is unknown)")
    return out


def _events(rs: Sequence[LostRange], p: int) -> list[str]:
    """Part 2: the faults, then the elections that replaced them."""
    parts = []
    seen: dict[Any, dict[str, Any]] = {}
    for r in rs:
        for f in r.faults:
            seen.setdefault((f.get("index"), f["time_s"], f["f"]), f)
    faults = pick_faults(seen.values(), [f for r in rs for f in r.replicas])
    to_s = max((r.acked_to_s for r in rs if r.acked_to_s is not None), default=None)
    lost_at: dict[str, float] = {}
    for node, t in ((f.node, f.time_s) for r in rs for f in r.replicas
                    if f.status == "lost-unsynced" and f.time_s is not None):
        lost_at[node] = min(lost_at.get(node, t), t)
    if faults:
        parts.append(_and([f["phrase"] + on_disk(f, p, to_s, lost_at)
                           + (f" while ISR = {_fmt_set(f['isr'])}" if f.get("isr") else "") for f in faults]))
    elections: list[tuple[dict[str, Any], str | None]] = []
    for r in rs:
        el = r.election
        if el is not None and all((e["epoch"], e["leader"]) != (el["epoch"], el["leader"]) for e, _ in elections):
            elections.append((el, r.leader))
    if not elections:
        parts.append("no later leader epoch in any collected leader-epoch-checkpoint: how the log lost them is unknown")
    for el, leader in elections:
        who = el["leader"] or "an unknown leader"
        verb = "was re-elected" if el["leader"] == leader else "was elected"
        if el.get("unclean"):
            verb += " uncleanly (its leader recovery state RECOVERING)"
        end = "its log was empty" if el["start_offset"] == 0 else f"its log ended at {el['start_offset'] - 1}"
        parts.append(f"{who} {verb} with epoch {el['epoch']} at {_s(el['time_s'])} and {end}")
    return parts


def _capped(items: list[str]) -> list[str]:
    if len(items) <= _MAX_SAME:
        return items
    return items[:_MAX_SAME - 1] + [f"{len(items) - _MAX_SAME + 1} more"]


def _fates(rs: Sequence[LostRange], n: int) -> list[str]:
    """Part 3: what became of them on each replica (ReplicaFate statuses, merged over the ranges). A replica
    whose status differs between the ranges (a split brain's group) is said with the share of each."""
    parts = []
    fates = [(f, len(r.values)) for r in rs for f in r.replicas]
    share: dict[tuple[str, str, int | None], int] = {}
    for f, k in fates:
        key = (f.node, f.status, f.offset if f.status in ("truncated", "lost-unsynced") else None)
        share[key] = share.get(key, 0) + k

    def who(node: str, status: str, offset: int | None = None, said: str | None = None) -> str:
        k = share.get((node, status, offset), n)
        notes = [x for x in (said, f"{k:,} of them" if k < n else None) if x]
        return node + (f" ({'; '.join(notes)})" if notes else "")
    trunc: dict[int | None, dict[str, set[float | None]]] = {}
    for f, _ in fates:
        if f.status == "truncated":
            trunc.setdefault(f.offset, {}).setdefault(f.node, set()).add(f.time_s)
    said = []
    for off, by_node in sorted(trunc.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        order = sorted(by_node, key=lambda node: (min((t for t in by_node[node] if t is not None), default=1e18),
                                                  node))
        at = [_s(t) for node in order for t in sorted(x for x in by_node[node] if x is not None)]
        said.append(f"{_and([who(node, 'truncated', off) for node in order])} truncated to "
                    f"{off if off is not None else 'an unknown offset'}" + (f" (at {_and(_capped(at))})" if at else ""))
    if len(said) > _MAX_SAME:
        said = said[:_MAX_SAME - 1] + [f"{len(said) - _MAX_SAME + 1} more truncations"]
    parts += said
    unsynced: dict[int | None, list[str]] = {}
    for f, _ in sorted(fates, key=lambda fk: (fk[0].time_s is None, fk[0].time_s or 0)):
        if f.status == "lost-unsynced" and f.node not in unsynced.setdefault(f.offset, []):
            unsynced[f.offset].append(f.node)
    for off, nodes in unsynced.items():
        one = len(nodes) == 1
        end = f"ended at {off - 1}" if off else "was empty"
        parts.append(f"{_and([who(x, 'lost-unsynced', off) for x in nodes])} lost them with "
                     f"{'its' if one else 'their'} unsynced log tail{'' if one else 's'} "
                     f"({'its' if one else 'each'} log {end} after the restart)")
    lacked: dict[str, list[str]] = {}
    for f, _ in fates:
        if f.status == "did not hold":
            end = (f"its log ended at {f.offset - 1}" if f.offset else "its log was empty") + f" at {_s(f.time_s)}"
            if end not in lacked.setdefault(f.node, []):
                lacked[f.node].append(end)
    if lacked:
        parts.append(f"{_and([who(node, 'did not hold', None, _and(_capped(ends))) for node, ends in lacked.items()])}"
                     " did not hold them")
    held: dict[str, int] = {}
    for f, _ in fates:
        if f.held:
            held[f.node] = held.get(f.node, 0) + f.held
    parts.append(("still held by " + _and([f"{node} ({h}/{n})" for node, h in held.items()])) if held
                 else "no replica holds them now")
    unknown = _distinct((f.node, f.status) for f, _ in fates if f.status in ("unknown", "missing", "not collected"))
    if unknown:
        parts.append(f"for {_and([who(node, status) for node, status in unknown])} the evidence does not say")
    return parts


def why_parts(ranges: Sequence[LostRange]) -> list[str]:
    """The sentence about `ranges` (lost ranges of one partition, any order) in up to three parts (see the
    module docstring); joined with "; " they are `why`."""
    rs = sorted(ranges, key=lambda r: (r.acked_from_s is None, r.acked_from_s or 0, r.first_offset or 0))
    p = rs[0].partition
    n = sum(len(r.values) for r in rs)
    head = f"{spans_phrase([(r.first_offset, r.last_offset) for r in rs])} of p{p} ({n:,} value{'s' if n != 1 else ''})"
    t0 = min((r.acked_from_s for r in rs if r.acked_from_s is not None), default=None)
    t1 = max((r.acked_to_s for r in rs if r.acked_to_s is not None), default=None)
    when = f"at {_s(t0)}" if t0 == t1 else f"{_s(t0)}–{_s(t1)}"
    out = [_acked(rs, head, "were" if n != 1 else "was", when), "; ".join(_events(rs, p)), "; ".join(_fates(rs, n))]
    return [x for x in out if x]


def why(ranges: Sequence[LostRange]) -> str:
    """One sentence about `ranges` (lost ranges of one partition): `why_parts` joined, with a full stop."""
    return "; ".join(why_parts(ranges)) + "."
