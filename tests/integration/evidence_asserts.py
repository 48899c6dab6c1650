"""Assertions on a real run's explanation of its lost writes (evidence/explain/lost.py), shared by the scenario tests.

Each takes a finished run directory whose runner already collected evidence/raw and explained the
loss, rebuilds the explanation through the public `explain(run_dir, find_libs=run_libs)` and checks
it against the faults the history records.
"""
import re
from pathlib import Path

from kchaos.clusters.distribution import run_libs
from kchaos.core.history import read_history
from kchaos.evidence.explain.lost import Explanation, explain


def says_truncated(why: str, node: str, offset: int | None = None) -> bool:
    """Whether a loss explanation says that `node` truncated (to `offset`, when given), alone or named with
    others that truncated to the same offset ("n1 and n3 truncated to 313")."""
    to = re.compile(r" truncated to " + ("" if offset is None else rf"{offset}\b"))
    return any(re.search(rf"\b{node}\b", part.split(" truncated to ")[0])
               for part in why.split("; ") if to.search(part))


def _faults(run_dir: Path, f: str) -> list[dict]:
    return [o for o in read_history(run_dir / "history.jsonl")
            if o["process"] == "nemesis" and o["f"] == f and o["type"] == "ok"]


def _explained(run_dir: Path) -> Explanation:
    assert (run_dir / "evidence" / "explanation.json").is_file(), "the run did not explain its loss"
    assert (run_dir / "evidence" / "raw" / "collect.json").is_file()
    exp = explain(run_dir, find_libs=run_libs)
    assert exp.ranges and exp.lost > 0 and len(exp.why) == len(exp.ranges)
    assert sum(len(r.values) for r in exp.ranges) == exp.listed == exp.lost
    return exp


def assert_old_leader_truncated(run_dir: Path, old_leader: str) -> Explanation:
    """acks=1 failover: the old leader acknowledged every lost range alone, a follower was elected with a
    shorter log, and the old leader truncated to it when it came back; nobody holds the values."""
    exp = _explained(run_dir)
    for r in exp.ranges:
        assert r.leader == old_leader, r.why
        assert r.election and r.election["leader"] != old_leader and r.election["overwrote"], r.why
        assert r.election["start_offset"] <= r.last_offset
        fate = {f.node: f for f in r.replicas}[old_leader]
        assert fate.status == "truncated" and fate.offset <= r.last_offset and fate.source == "server.log", fate
        assert says_truncated(r.why, old_leader, fate.offset), r.why
        assert all(f.held == 0 for f in r.replicas), r.why
    return exp


def assert_followers_truncated_to_the_powerless_leader(run_dir: Path) -> Explanation:
    """acks=all, min.insync=2, the ISR shrunk to the leader and its power failed: the leader acknowledged
    the ranges while the followers were in the ISR, lost them unsynced, was re-elected with a shorter log,
    and the followers held out of the ISR (stalled or slowed), which held them, truncated to it."""
    exp = _explained(run_dir)
    [power] = _faults(run_dir, "power-fail")
    [slow] = _faults(run_dir, "start-stall") or _faults(run_dir, "start-slow")
    leader, followers = power["nodes"][0], set(slow["nodes"])
    assert exp.truncated() == followers
    for r in exp.ranges:
        assert r.leader == leader and followers <= set(r.isr or ()), r.why
        assert r.election and r.election["leader"] == leader and r.election["start_offset"] <= r.first_offset
        fates = {f.node: f for f in r.replicas}
        assert fates[leader].status == "lost-unsynced", fates[leader]
        for n in followers:
            assert fates[n].status == "truncated" and fates[n].offset <= r.first_offset, fates[n]
        assert f"{leader} lost power at" in r.why and f"{leader} was re-elected with epoch" in r.why, r.why
    return exp
