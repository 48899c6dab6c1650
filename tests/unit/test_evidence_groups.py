"""Lost writes grouped by cause (evidence/explain/groups.py), told in one sentence each (evidence/explain/why.py), on
the console (harness/cli/console.py) and in report.html (reports/run/evidence_html.py): a hand-built run in the tools'
real formats with 1,000 lost offsets in three causes, and a fixture cut from a real acks=1 run with a split brain
(tests/unit/data/evidence/README.md)."""
import json
import re
import shutil
from pathlib import Path

import pytest
from histories import write_registry_faults
from hypothesis import given
from hypothesis import strategies as st
from test_evidence import DATA, T0, _batch, _meta, _stamp, recorded_dumper

from kchaos.core.lines import LINE_WIDTH, short_lines
from kchaos.evidence.explain.lost import explain, load_explanation
from kchaos.evidence.explain.text import MAX_CONSOLE_GROUPS, console_lines, explain_lines
from kchaos.evidence.explain.why import spans_phrase
from kchaos.reports.run.evidence_html import MAX_GROUPS, evidence_section

SPLIT_BRAIN = DATA / "split-brain-acks1-3.7.2"

# (partition, first leader id, when its leader was cut off, lost values, new leader id, new epoch's time, healed)
CAUSES = [(0, 1, 3.0, 400, 2, 5.0, 9.0), (1, 1, 3.0, 350, 2, 5.0, 9.0), (2, 3, 12.0, 250, 1, 14.0, 18.0)]


def _leader_line(node_id: int, p: int, epoch: int, offset: int) -> str:
    return (f"INFO [Broker id={node_id}] Leader kchaos-{p} with topic id Some(T) starts at leader epoch {epoch} from "
            f"offset {offset} with partition epoch {epoch}, high watermark {offset}, ISR [{node_id}]")


def _follower_line(node_id: int, p: int, epoch: int, offset: int, leader: int) -> str:
    return (f"INFO [Broker id={node_id}] Follower kchaos-{p} starts at leader epoch {epoch} from offset {offset} "
            f"with partition epoch {epoch} and high watermark 10. Current leader is {leader}.")


def _truncation(node_id: int, leader: int, p: int, to: int) -> str:
    return (f"INFO [ReplicaFetcher replicaId={node_id}, leaderId={leader}, fetcherId=0] Truncating partition "
            f"kchaos-{p} with TruncationState(offset={to}, completed=true) due to leader epoch and offset "
            f"EpochEndOffset(errorCode=0, partition={p}, leaderEpoch=0, endOffset={to}) "
            "(kafka.server.ReplicaFetcherThread)")


@pytest.fixture
def three_causes_run(tmp_path) -> Path:
    """Three partitions, acks=1. n1 leads p0 and p1, n3 leads p2 (epoch 0); each acknowledges offsets 0-9 (kept).
    n1 is cut off at 3 s and acknowledges 400 values on p0 and 350 on p1 (offsets 10-) that n2, elected at 5 s
    (epoch 1 from offset 10), never has; p0's ISR shrinks to {n1} at 4 s, in the middle of them. n3 is cut off at
    12 s and acknowledges 250 values on p2 that n1, elected at 14 s, never has. Each cut-off leader truncates to
    10 when healed. p1's lost offsets have one that was kept in the middle. 1,000 lost writes in 5 ranges, three
    causes."""
    run = tmp_path / "run"
    (run / "evidence" / "raw").mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"topic": {"name": "kchaos"}, "producer": {"acks": "1"},
                                               "versions": {"kafka": "3.7.2"}, "history_start_unix_ms": T0}))
    hist, logs, seg, meta, lost = [], {1: [], 2: [], 3: []}, {}, [], []
    value = 0
    meta_off = [100]

    def change(s: float, record: dict) -> None:
        meta.extend(_meta(meta_off[0], s, record))
        meta_off[0] += 1
    meta.extend(_meta(0, 0.1, {"type": "TOPIC_RECORD", "version": 0, "data": {"name": "kchaos", "topicId": "T"}}))
    for p, old, cut, n, new, elected, healed in CAUSES:
        others = [i for i in (1, 2, 3) if i != old]
        meta.extend(_meta(1 + p, 0.1, {"type": "PARTITION_RECORD", "version": 1, "data": {
            "partitionId": p, "topicId": "T", "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": old,
            "leaderEpoch": 0, "partitionEpoch": 0}}))
        logs[old].append((0.5, "state-change.log", _leader_line(old, p, 0, 0)))
        for o in others:
            logs[o].append((0.6, "state-change.log", _follower_line(o, p, 0, 0, old)))
        # p1 has one more: a consumer read offset 185 from n1 before the truncation, so it was not lost.
        during = n + (p == 1)
        sends = [(off, 1 + off / 10, True, 0) for off in range(10)]
        sends += [(10 + i, cut + 0.1 + i * (elected - cut - 0.2) / during, p == 1 and i == 175, None)
                  for i in range(during)]
        sends += [(10 + i, elected + 1 + i / 10, True, 1) for i in range(3)]
        for off, s, kept, stored in sends:  # stored: the leader epoch of its batch in every replica's log now
            value += 1
            hist.append({"time": int(s * 1e9) - 1000, "process": p, "type": "invoke", "f": "send", "partition": p,
                         "value": value})
            hist.append({"time": int(s * 1e9), "process": p, "type": "ok", "f": "send", "partition": p,
                         "value": value, "offset": off})
            if not kept:
                lost.append(value)
            if stored is not None:
                for node in (1, 2, 3):
                    seg.setdefault((node, p), []).extend(_batch(off, stored, value, int(T0 + s * 1000)))
        hist.append({"time": int(cut * 1e9), "process": "nemesis", "type": "ok", "f": "start-partition",
                     "nemesis": "partition-leader", "nodes": [f"n{old}"], "targets": [f"n{old}"],
                     "grudge": {f"n{old}": [f"n{o}" for o in others], **{f"n{o}": [f"n{old}"] for o in others}}})
        hist.append({"time": int(healed * 1e9), "process": "nemesis", "type": "ok", "f": "stop-partition",
                     "nemesis": "partition-leader", "nodes": ["n1", "n2", "n3"]})
        if p == 0:  # the ISR shrinks to the isolated leader while it goes on: p0's lost offsets are two ranges
            change(4.0, {"type": "PARTITION_CHANGE_RECORD", "version": 1, "data": {
                "partitionId": 0, "topicId": "T", "isr": [1]}})
        change(elected, {"type": "PARTITION_CHANGE_RECORD", "version": 1, "data": {
            "partitionId": p, "topicId": "T", "isr": others, "leader": new}})
        change(elected, {"type": "BROKER_REGISTRATION_CHANGE_RECORD", "version": 0, "data": {
            "brokerId": old, "brokerEpoch": 5, "fenced": 1}})
        change(healed + 0.8, {"type": "PARTITION_CHANGE_RECORD", "version": 1, "data": {
            "partitionId": p, "topicId": "T", "isr": [*others, old]}})
        logs[new].append((elected + 0.1, "state-change.log", _leader_line(new, p, 1, 10)))
        for o in others:
            if o != new:
                logs[o].append((elected + 1.5, "state-change.log", _follower_line(o, p, 1, 10, new)))
        logs[old].append((healed + 0.5, "state-change.log", _follower_line(old, p, 1, 10 + n, new)))
        logs[old].append((healed + 0.6, "server.log", _truncation(old, new, p, 10)))
        logs[old].append((healed + 0.6, "server.log", f"INFO [UnifiedLog partition=kchaos-{p}, "
                          "dir=/var/lib/kafka/data] Truncating to offset 10 (kafka.log.UnifiedLog)"))
    hist.sort(key=lambda h: h["time"])
    (run / "history.jsonl").write_text("".join(json.dumps({"index": i, **h}) + "\n" for i, h in enumerate(hist)))
    write_registry_faults(run, hist)
    (run / "results.json").write_text(json.dumps({"counts": {"lost": len(lost)}, "timeline": {"anomalies": {
        "lost": [{"key": v, "acked_s": None} for v in lost]}}}))
    dump_seg, dump_meta = [], []
    for node in (1, 2, 3):
        d = run / "nodes" / f"n{node}"
        d.mkdir(parents=True)
        (d / "server.properties").write_text(f"node.id={node}\n")
        for s, name, text in sorted(logs[node]):
            with open(d / name, "a") as fh:
                fh.write(f"{_stamp(s)} {text}\n")
        raw = run / "evidence" / "raw" / f"n{node}"
        (raw / "__cluster_metadata-0").mkdir(parents=True)
        (raw / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"")
        for p, *_ in CAUSES:
            (raw / f"kchaos-{p}").mkdir()
            (raw / f"kchaos-{p}" / "00000000000000000000.log").write_bytes(b"")
            (raw / f"kchaos-{p}" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 10\n")
            dump_seg += [f"Dumping n{node}/kchaos-{p}/00000000000000000000.log", "Log starting offset: 0",
                         *seg[(node, p)]]
        dump_meta += [f"Dumping n{node}/__cluster_metadata-0/00000000000000000000.log", "Log starting offset: 0",
                      *meta]
    (run / "dump-segments.txt").write_text("\n".join(dump_seg) + "\n")
    (run / "dump-metadata.txt").write_text("\n".join(dump_meta) + "\n")
    return run


def test_a_thousand_lost_offsets_in_three_causes_are_three_groups(three_causes_run):
    run = three_causes_run
    exp = explain(run, libs=Path("/x"), dumper=recorded_dumper(run))
    assert exp.lost == 1000 and sum(len(r.values) for r in exp.ranges) == 1000
    # p0's ISR changed in the middle, p1's offsets are not contiguous: two ranges each, one cause each.
    assert len(exp.ranges) == 5
    assert [(g.partition, g.values, g.acked_by, len(g.ranges)) for g in exp.groups] == [
        (0, 400, ("n1",), 2), (1, 350, ("n1",), 2), (2, 250, ("n3",), 1)]
    assert exp.groups[1].why.startswith("offsets 10-184 and 186-360 of p1 (350 values) were acknowledged")
    p0 = exp.groups[0]
    for part in ("offsets 10-409 of p0 (400 values)", "by n1 in leader epoch 0 while ISR = {n1,n2,n3} then {n1}",
                 "n1 was cut off from n2, n3 at 3.0 s", "n2 was elected with epoch 1 at 5.0 s and its log ended at 9",
                 "n1 truncated to 10 (at 9.6 s)", "no replica holds them now"):
        assert part in p0.why, (part, p0.why)
    assert len(p0.parts) == 3 and p0.why == "; ".join(p0.parts) + "."
    assert {r["node"]: r["statuses"] for r in p0.replicas} == {
        "n1": {"truncated": 400}, "n2": {"did not hold": 400}, "n3": {"did not hold": 400}}
    assert "n3 was cut off from n1, n2 at 12.0 s" in exp.groups[2].why
    saved = load_explanation(run)
    assert [g["values"] for g in saved["groups"]] == [400, 350, 250] and len(saved["ranges"]) == 5
    assert saved["why"] == exp.why  # one sentence per range, as before groups
    # kchaos explain: each sentence in short lines ("why: ", then indented; each of a group's three parts on lines
    # of its own), a blank line between two
    groups = [" ".join(g.parts).rstrip(".") + "." for g in exp.groups]
    for lines, sentences in ((explain_lines(saved), groups), (explain_lines(saved, True), exp.why)):
        said = [" ".join(x.strip() for x in block.split("\n")) for block in "\n".join(lines).split("\n\n")]
        assert said == [f"why: {s}" for s in sentences]
        assert all(len(x) <= LINE_WIDTH and x.startswith(("why: ", "     ")) for x in lines if x)


def test_a_real_acks1_split_brain_is_one_group_acknowledged_by_both_leaders(tmp_path):
    # Cut from the demo's acks=1 cell (seed 405813600, Kafka 3.7.2): n3, leader of p2, cut off at 29.2 s, went on
    # acknowledging in epoch 0; n1, elected at 41.5 s from offset 1276, acknowledged the same offsets in epoch 1
    # and was cut off at 45.3 s; n2, elected at 55.3 s from 1277, kept neither. Before groups the full run's
    # explanation had 1,942 ranges (this fixture's, 132), each mostly one offset, alternating n3 and n1.
    run = tmp_path / "run"
    shutil.copytree(SPLIT_BRAIN, run)
    exp = explain(run, libs=Path("/x"), dumper=recorded_dumper(SPLIT_BRAIN))
    assert len(exp.ranges) == 4 and len(exp.groups) <= 10
    assert [(g.partition, g.values, g.acked_by) for g in exp.groups] == [(2, 137, ("n1", "n3")), (0, 59, ("n1",))]
    brain = exp.groups[0]
    assert brain.leader_epochs == (0, 1) and sum(g.values for g in exp.groups) == exp.listed == 196
    for part in ("offsets 1276-2332 of p2 (137 values)", "by both n3 (leader epoch 0, ISR = {n3,n1,n2}",
                 "and n1 (leader epoch 1, ISR = {n1,n2}", "23 of them by n1 or n3",
                 "n1 was elected with epoch 1 at 41.5 s", "n2 was elected with epoch 2 at 55.3 s",
                 "n1 truncated to 1277 (at 71.6 s)", "no replica holds them now"):
        assert part in brain.why, (part, brain.why)
    n2 = next(r for r in brain.replicas if r["node"] == "n2")
    assert n2["statuses"] == {"truncated": 59, "unknown": 23, "did not hold": 55}
    lines = console_lines(exp.to_dict(), run)
    starts = [i for i, line in enumerate(lines) if line.startswith("why: ")]
    assert len(starts) == 2 and lines[0].startswith("why: offsets 1276-2332 of p2") and len(lines) > 6
    assert all("\n" not in line and len(line) <= LINE_WIDTH for line in lines)
    assert " ".join(x.strip() for x in lines[:starts[1]]) == "why: " + " ".join(brain.parts) + "."  # every word


def _many(n: int) -> dict:
    """An explanation.json of `n` one-value groups on p0 (the shape of a run whose every lost write differs)."""
    ranges = [{"partition": 0, "first_offset": i * 2, "last_offset": i * 2, "values": [i], "acked_from_s": 1.0,
               "acked_to_s": 1.0, "leader": "n1", "leader_epoch": i, "why": f"offset {i * 2} of p0 (1 value) was lost.",
               "replicas": [{"node": "n1", "status": "truncated", "held": 0, "offset": i, "time_s": 2.0,
                             "source": "server.log", "had": "acknowledged them as leader", "detail": "x" * 80}]}
              for i in range(n)]
    groups = [{"partition": 0, "ranges": [i], "spans": [[i * 2, i * 2]], "values": 1, "acked_by": ["n1"],
               "parts": [f"offset {i * 2} of p0 (1 value) was acknowledged at 1.0 s by n1", "n1 lost power",
                         "no replica holds them now"], "why": r["why"],
               "replicas": [{"node": "n1", "statuses": {"truncated": 1}, "held": 0, "offsets": [i], "times": [2.0],
                             "sources": ["server.log"], "details": ["x" * 80]}]} for i, r in enumerate(ranges)]
    return {"run": "r", "lost": n, "listed": n, "ranges": ranges, "groups": groups, "timelines": {}, "clock": {},
            "notes": []}


def test_the_console_says_at_most_five_groups_then_how_many_more():
    lines = console_lines(_many(3000), "results/x")
    assert len(lines) == MAX_CONSOLE_GROUPS * 3 + 1
    assert lines[-1] == "… 2995 more groups (2,995 values): kchaos explain results/x"
    assert lines[0].startswith("why: offset 0 of p0") and lines[2].endswith("no replica holds them now.")
    assert console_lines({"ranges": [], "groups": []}, "r") == []


def test_the_report_section_stays_small_however_many_groups(tmp_path):
    run = tmp_path / "run"
    (run / "evidence").mkdir(parents=True)
    html = "\n".join(evidence_section(run, _many(3000)))
    assert html.count("<details") == MAX_GROUPS and "the largest 20 are shown" in html
    assert len(html.encode()) < 60_000, len(html.encode())


def test_offsets_of_many_ranges_name_two_and_count_the_rest():
    assert spans_phrase([(0, 195), (300, 410)] + [(500 + 10 * i, 500 + 10 * i) for i in range(12)]) == \
        "offsets 0-195, 300-410 and 12 more ranges"
    assert spans_phrase([(5, 5)]) == "offset 5" and spans_phrase([(0, 7)]) == "offsets 0-7"
    assert spans_phrase([(1276, 2153), (1277, 2332), (2333, 2400)]) == "offsets 1276-2400"  # overlapping, adjacent
    assert spans_phrase([(None, None)]) == "offsets unknown"
    assert spans_phrase([(1, 2), (4, 4), (None, None)]) == "offsets 1-2, 4 and 1 range of unknown offsets"


@given(st.lists(st.text(alphabet="ab ,;", min_size=1, max_size=60), min_size=1, max_size=30), st.integers(20, 160))
def test_short_lines_keep_every_word_and_break_between_clauses_first(pieces, width):
    text = " ".join(" ".join(p.split()) for p in pieces if p.split())
    lines = short_lines(text, width)
    assert " ".join(lines) == text  # every character, in order: only spaces became breaks
    assert all(len(x) <= width or " " not in x for x in lines)  # only a single long word is over the width
    if all(len(piece) <= width for piece in re.split(r"(?<=[;,]) ", text)):  # clauses fit: broken only after ; ,
        assert all(line.endswith((";", ",")) for line in lines[:-1]) if text else lines == [""]


def test_a_clause_with_no_comma_where_it_runs_long_is_broken_between_words():
    why = ("offsets 283-1297 of p0 (1,015 values) were acknowledged 12.7 s–30.5 s by n1 in leader epoch 0 while "
           "ISR = {n1,n2,n3} as n1 knew it (from 25.0 s on, the controller had made n2 leader with epoch 1; "
           "n1 did not know)")
    lines = short_lines(why, 145)
    assert " ".join(lines) == why and all(len(line) <= 145 for line in lines), lines

