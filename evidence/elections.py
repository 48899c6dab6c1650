"""Every leader election of a run, from the KRaft metadata log, against what the controllers logged about it.

An election is a partition state whose record set a new leader (not "no leader"). Its kind, the first that applies,
by where the new leader stood in the state before it and in its own:

- `unclean`: the record set the leader recovery state RECOVERING, Kafka's mark of an unclean election, or elected a
  leader from outside the previous ISR while the state was still RECOVERING (it stays so until the leader recovers);
- `isr`: the new leader was in the previous ISR;
- `elr`: it was in the previous Eligible Leader Replicas (KIP-966, Kafka 4.x);
- `joined`: it joined the ISR in the same record, as the first target replica of a completing reassignment does;
- `unmarked`: none of these: a leader from outside the ISR and ELR that Kafka did not mark unclean.

Up to 4.0 the active and standby controllers log `UNCLEAN partition change for <topic>-<p> ...` at INFO, and count
UncleanLeaderElectionsPerSec, for every change whose new leader was outside the previous ISR (and ELR): `joined`
elections included (KAFKA-19212, fixed in 4.1; the "unclean election during reassignment with unclean election
disabled" of KAFKA-19148). Each such line is matched to its record by topic, partition and partition epoch, and an
election labelled unclean that the metadata log shows clean is a `mislabelled` one. The unclean elections
themselves are judged against the guarantee elsewhere (`kchaos.checkers.verdict.promise_run`).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.evidence.kraft_metadata import NO_LEADER, MetadataLog, PartitionState

__all__ = ["KINDS", "Election", "elections", "elections_line", "elections_section", "unclean_labels"]

KINDS = ("isr", "elr", "joined", "unclean", "unmarked")  # in the order results.json lists them
MAX_EXAMPLES = 20
LOG_FILES = ("server.log", "controller.log")
# 3.7 to 4.4 (PartitionRegistration.maybeLogPartitionChange): the diff lists each changed field as `name: a -> b`.
_LABEL = re.compile(r"UNCLEAN partition change for (?P<tp>\S+)-(?P<p>\d+) with topic ID \S+: (?P<diff>.*?)"
                    r"(?: \((?:org|kafka)\.\S+\))?$")
_EPOCH = re.compile(r"\bpartitionEpoch: (-?\d+) -> (-?\d+)")


@dataclass(frozen=True)
class Election:
    """One leader election in the metadata log: the state before it, the state it made, its kind (KINDS) and
    whether a controller logged it as an UNCLEAN partition change."""

    before: PartitionState
    after: PartitionState
    kind: str
    labelled_unclean: bool = False

    @property
    def mislabelled(self) -> bool:
        """Logged UNCLEAN by a controller while its record shows a clean election."""
        return self.labelled_unclean and self.kind not in ("unclean", "unmarked")

    def to_dict(self, names: Mapping[int, str]) -> dict[str, Any]:
        """JSON-able form, brokers by node name where known."""
        name = lambda i: names.get(i, str(i))  # noqa: E731
        b, a = self.before, self.after
        return {"topic": a.topic, "partition": a.partition, "time_ms": a.time_ms, "offset": a.offset,
                "kind": self.kind, "labelled_unclean": self.labelled_unclean,
                "leader": [name(b.leader) if b.leader != NO_LEADER else None, name(a.leader)],
                "leader_epoch": a.leader_epoch, "partition_epoch": a.partition_epoch,
                "isr": [[name(i) for i in b.isr], [name(i) for i in a.isr]],
                "replicas": [[name(i) for i in b.replicas], [name(i) for i in a.replicas]]}


def _kind(before: PartitionState, after: PartitionState) -> str:
    if after.recovering and (not before.recovering or after.leader not in before.isr):
        return "unclean"
    if after.leader in before.isr:
        return "isr"
    if after.leader in (before.elr or ()):
        return "elr"
    if after.leader in after.isr and not after.recovering:
        return "joined"
    return "unmarked"


def unclean_labels(nodes_dir: Path) -> set[tuple[str, int, int]]:
    """(topic, partition, partition epoch) of every `UNCLEAN partition change` line in the nodes' server.log and
    controller.log (nodes/<node>/), each once however many controllers logged it."""
    out: set[tuple[str, int, int]] = set()
    if not Path(nodes_dir).is_dir():
        return out
    for d in sorted(p for p in Path(nodes_dir).iterdir() if p.is_dir()):
        for f in (d / name for name in LOG_FILES):
            if not f.is_file():
                continue
            with open(f, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if "UNCLEAN partition change" in line and (m := _LABEL.search(line.rstrip("\n"))) \
                            and (e := _EPOCH.search(m.group("diff"))):
                        out.add((m.group("tp"), int(m.group("p")), int(e.group(2))))
    return out


def elections(meta: MetadataLog, labels: Iterable[tuple[str, int, int]] = ()) -> list[Election]:
    """Every election of every partition in the metadata log, in log order, each with its kind and whether
    `labels` ((topic, partition, partition epoch), as `unclean_labels` reads them) name it."""
    labelled = set(labels)
    out: list[Election] = []
    for states in meta.states.values():
        for before, after in zip(states, states[1:]):
            if "leader" in after.changed and after.leader != NO_LEADER and after.leader != before.leader:
                out.append(Election(before, after, _kind(before, after),
                                    (str(after.topic), after.partition, after.partition_epoch) in labelled))
    return sorted(out, key=lambda e: e.after.offset)


def elections_section(meta: MetadataLog, nodes_dir: Path, names: Mapping[int, str]) -> dict[str, Any]:
    """results.json's `agreement.elections`: the elections per kind (KINDS), how many a controller labelled unclean,
    the `mislabelled` ones (labelled unclean, clean in the metadata log) and the `unmarked` ones, the first
    MAX_EXAMPLES of each, and `unmatched_labels`: UNCLEAN lines whose record the metadata log does not hold."""
    labels = unclean_labels(nodes_dir)
    found = elections(meta, labels)
    matched = {(str(e.after.topic), e.after.partition, e.after.partition_epoch) for e in found}
    counts = Counter(e.kind for e in found)
    return {"elections": len(found), "kinds": {k: counts.get(k, 0) for k in KINDS},
            "labelled_unclean": sum(e.labelled_unclean for e in found),
            "mislabelled": sum(e.mislabelled for e in found),
            "unmatched_labels": len(labels - matched),
            "mislabelled_elections": [e.to_dict(names) for e in found if e.mislabelled][:MAX_EXAMPLES],
            "unmarked_elections": [e.to_dict(names) for e in found if e.kind == "unmarked"][:MAX_EXAMPLES]}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def elections_line(section: Mapping[str, Any]) -> str | None:
    """`agreement.elections` in one sentence for report.html; None when the controllers' log and the metadata log
    told the same story and no election was unmarked."""
    kinds = section.get("kinds") or {}
    parts = []
    if n := int(section.get("mislabelled") or 0):
        first = (section.get("mislabelled_elections") or [{}])[0]
        moved = " → ".join(map(str, first.get("leader") or []))
        parts.append(f"the controllers logged {_plural(n, 'clean election')} as an UNCLEAN partition change (first: "
                     f"{first.get('topic')}-{first.get('partition')}, leader {moved}: the "
                     "new leader joined the ISR in the same record, as when a reassignment completes): Kafka's "
                     "label and UncleanLeaderElectionsPerSec before 4.1 (KAFKA-19212), not an unclean election")
    if n := int(kinds.get("unmarked") or 0):
        first = (section.get("unmarked_elections") or [{}])[0]
        parts.append(f"{_plural(n, 'leader')} elected from outside the ISR and ELR without Kafka marking the "
                     f"election unclean (first: {first.get('topic')}-{first.get('partition')} at leader epoch "
                     f"{first.get('leader_epoch')})")
    if not parts:
        return None
    return f"Elections ({section.get('elections')} in the metadata log): " + "; ".join(parts)
