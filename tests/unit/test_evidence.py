"""Kafka's evidence for lost writes: DumpLogSegments parsing, metadata replay, broker log lines, collection,
and the explanation, on fixtures cut from real runs (tests/unit/data/evidence/*/dump-*.txt are real
DumpLogSegments output; the run directories are real runs' files, reduced)."""
import json
import shutil
from datetime import UTC
from pathlib import Path

import pytest
from histories import write_registry_faults

from kchaos.core.faults import FaultCatalogue
from kchaos.evidence import EvidenceError
from kchaos.evidence.broker_logs import parse_lines, read_node_logs
from kchaos.evidence.collect import COLLECT_FILE, NodeCopy, collect, wanted
from kchaos.evidence.decode import Clock, decode, history_clock, value_of
from kchaos.evidence.explain.facts import _nemesis_line
from kchaos.evidence.explain.lost import explain, load_explanation
from kchaos.evidence.explain.why import on_disk as _on_disk
from kchaos.evidence.files import SEGMENTS_FILE
from kchaos.evidence.kafka_logs import metadata_records, parse_dump, parse_epoch_checkpoint, read_epoch_checkpoint
from kchaos.evidence.kraft_metadata import replay
from kchaos.harness.cli.main import main
from kchaos.reports.run.evidence_html import evidence_section

DATA = Path(__file__).parent / "data" / "evidence"
LAST_ISR = DATA / "last-isr-3.7.2"


def _sections(text: str, files) -> list[str]:
    """The parts of a recorded DumpLogSegments output that `files` would have printed."""
    out, on = [], False
    for line in text.splitlines():
        if line.startswith("Dumping "):
            on = line[len("Dumping "):] in files
        if on:
            out.append(line)
    return out


def recorded_dumper(fixture: Path):
    """A stand-in for checkers.kafka_logs.dump that replays the fixture's recorded tool output."""
    seg, meta = (fixture / "dump-segments.txt").read_text(), (fixture / "dump-metadata.txt").read_text()

    def dumper(libs, files, cwd, metadata=False):
        return _sections(meta if metadata else seg, set(files))
    return dumper


@pytest.fixture
def last_isr_run(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(LAST_ISR, run)
    return run


# --- DumpLogSegments output --------------------------------------------------------------------

def test_segments_of_3_7_parse_into_batches_with_history_values():
    notes: list[str] = []
    batches = list(parse_dump((LAST_ISR / "dump-segments.txt").read_text().splitlines(), notes))
    assert notes == []
    files = {b.file for b in batches}
    assert files == {f"n{i}/kchaos-0/00000000000000000000.log" for i in (1, 2, 3)}
    first = batches[0]
    assert (first.base_offset, first.last_offset, first.leader_epoch, first.is_control) == (0, 0, 2, False)
    assert first.time_ms == 1795422544978 and first.records[0].offset == 0
    assert value_of(first.records[0].payload) == 204
    assert all(b.leader_epoch == 2 for b in batches)  # everything older was truncated away


def test_parse_dump_keeps_unknown_lines_as_notes_and_reads_control_records():
    text = ["Dumping a/x-0/0.log", "Starting offset: 0",
            "baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 0 "
            "partitionLeaderEpoch: 3 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
            "position: 0 CreateTime: 10 size: 78 magic: 2 compresscodec: none crc: 1 isvalid: true",
            "| offset: 5 CreateTime: 10 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT "
            "coordinatorEpoch: 0",
            "Found 12 invalid bytes at the end of 0.log"]
    notes: list[str] = []
    [b] = list(parse_dump(text, notes))
    assert b.is_control and b.producer_id == 7 and b.leader_epoch == 3
    assert b.records[0].payload is None and b.records[0].control == "COMMIT"
    assert notes == ["a/x-0/0.log: Found 12 invalid bytes at the end of 0.log"]


def test_metadata_of_3_7_replays_to_kafkas_leader_epochs():
    # The brokers' state-change.log of that run says: epoch 0 until n1 was fenced, 1 while leaderless,
    # 2 when n1 was elected again; partition epochs 0..7.
    batches = list(parse_dump((LAST_ISR / "dump-metadata.txt").read_text().splitlines()))
    log = replay(metadata_records(b for b in batches if b.file.startswith("n1/")))
    tl = log.timeline("kchaos", 0)
    assert [(s.leader, s.leader_epoch, s.partition_epoch, s.isr) for s in tl] == [
        (1, 0, 0, (1, 2, 3)), (1, 0, 1, (1,)), (1, 0, 2, (1, 3)), (1, 0, 3, (1,)),
        (-1, 1, 4, (1,)), (1, 2, 5, (1,)), (1, 2, 6, (1, 3)), (1, 2, 7, (1, 3, 2))]
    assert ("fenced", 1) in {(b.kind, b.broker) for b in log.brokers}
    assert log.features.get("metadata.version") == 19
    assert log.state_at("kchaos", 0, tl[4].time_ms - 1).leader_epoch == 0


def test_replay_follows_merge_rules_for_elr_and_explicit_same_leader():
    recs = [{"offset": 0, "time_ms": 0, "type": "TOPIC_RECORD", "data": {"name": "t", "topicId": "T"}},
            {"offset": 1, "time_ms": 1, "type": "PARTITION_RECORD",
             "data": {"partitionId": 0, "topicId": "T", "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1,
                      "leaderEpoch": 4, "partitionEpoch": 9, "eligibleLeaderReplicas": [], "lastKnownElr": []}},
            {"offset": 2, "time_ms": 2, "type": "PARTITION_CHANGE_RECORD",
             "data": {"partitionId": 0, "topicId": "T", "isr": [1], "eligibleLeaderReplicas": [2, 3]}},
            {"offset": 3, "time_ms": 3, "type": "PARTITION_CHANGE_RECORD",
             "data": {"partitionId": 0, "topicId": "T", "leader": 1}},
            {"offset": 4, "time_ms": 4, "type": "PARTITION_CHANGE_RECORD",
             "data": {"partitionId": 0, "topicId": "T", "leader": 2, "isr": [2], "eligibleLeaderReplicas": [3],
                      "lastKnownELR": [1]}}]
    tl = replay(recs).timeline("t", 0)
    assert [(s.leader, s.leader_epoch, s.partition_epoch) for s in tl] == [
        (1, 4, 9), (1, 4, 10), (1, 5, 11), (2, 6, 12)]
    assert tl[1].elr == (2, 3) and tl[2].elr == (2, 3) and tl[3].elr == (3,) and tl[3].last_known_elr == (1,)
    assert tl[1].changed == ("isr", "eligibleLeaderReplicas")


def test_epoch_checkpoint_reads_kafkas_format_and_rejects_garbage(tmp_path):
    assert read_epoch_checkpoint(LAST_ISR / "evidence/raw/n2/kchaos-0/leader-epoch-checkpoint") == [(2, 0)]
    f = tmp_path / "cp"
    f.write_text("0\n2\n0 0\n1 100\n")
    assert read_epoch_checkpoint(f) == [(0, 0), (1, 100)]
    f.write_text("0\n3\n0 0\n")
    assert read_epoch_checkpoint(f) is None
    assert read_epoch_checkpoint(tmp_path / "missing") is None


@pytest.mark.parametrize("kept, entries", [
    (0, []), (1, []), (2, []),  # before the count line: Kafka reads no entries
    (3, None), (4, None),  # a count of 1, no entry
    (5, None), (6, None),  # "0", "0 ": not two numbers
    (7, [(0, 0)]), (8, [(0, 0)]),  # the entry whole, with or without its newline
])
def test_a_torn_epoch_checkpoint_is_refused_as_kafkas_reader_refuses_it(kept, entries):
    assert parse_epoch_checkpoint("0\n1\n0 0\n"[:kept]) == entries


@pytest.mark.parametrize("text", ["0\n1\n 0 0\n", "0\n1\n0 0 0\n", "0\n1\n0 0\n1 5\n", "1\n0\n",
                                  "0\n1\n0 1_0\n", "\x00\x00\x00\x00\x00\x00\x00\x00"])
def test_what_kafkas_checkpoint_reader_refuses_is_refused(text):
    assert parse_epoch_checkpoint(text) is None


# --- broker logs -------------------------------------------------------------------------------

def test_broker_logs_give_truncations_with_their_reason_and_log_ends():
    events = read_node_logs(LAST_ISR / "nodes", "kchaos")
    cut = [(e.node, e.offset) for e in events if e.kind == "truncated" and not e.no_effect]
    assert sorted(cut) == [("n2", 0), ("n3", 0)]
    assert all("EpochEndOffset" in e.reason for e in events if e.kind == "truncated" and not e.no_effect)
    assert ("n1", 0) in {(e.node, e.offset) for e in events if e.kind == "loaded"}
    assert ("n2", 1, 208) in {(e.node, e.epoch, e.offset) for e in events if e.kind == "follower"}
    assert events == sorted(events, key=lambda e: e.time_ms)


def test_broker_log_lines_of_other_topics_and_noop_truncations():
    lines = ["[2026-11-23 08:29:14,348] INFO [UnifiedLog partition=kchaos2-0, dir=/d] Truncating to offset 5 (x)",
             "[2026-11-23 08:29:14,349] INFO [UnifiedLog partition=kchaos-1, dir=/d] Truncating to 3 has no effect "
             "as the largest offset in the log is 1 (kafka.log.UnifiedLog)"]
    [e] = parse_lines("n1", lines, "kchaos")
    assert (e.partition, e.offset, e.no_effect, e.time_ms % 1000) == (1, 3, True, 349)


# --- collection --------------------------------------------------------------------------------

class FakeCluster:
    """A cluster whose nodes' data directories are the given listings; copies write stand-in files."""

    def __init__(self, listings: dict[str, list[tuple[str, int]]], broken: str | None = None):
        self.specs = [type("Spec", (), {"name": n})() for n in listings]
        self.listings, self.broken, self.copied = listings, broken, {}

    def exec(self, node, cmd):
        if node == self.broken:
            return 1, "find: '/var/lib/kafka/data': Transport endpoint is not connected"
        return 0, "".join(f"{size} {rel}\n" for rel, size in self.listings[node])

    def data_dir(self, node):
        return "/var/lib/kafka/data"

    def copy_out(self, node, directory, files, dest):
        assert directory == self.data_dir(node)
        self.copied[node] = list(files)
        for f in files:
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            (dest / f).write_text("x")
        return len(files)


def test_wanted_picks_the_topics_partitions_and_the_metadata_log():
    assert wanted("kchaos-0/00000000000000000000.log", "kchaos")
    assert wanted("kchaos-12/leader-epoch-checkpoint", "kchaos")
    assert wanted("__cluster_metadata-0/quorum-state", "kchaos")
    assert wanted("__transaction_state-7/00000000000000000000.log", "kchaos")  # the coordinators' log
    assert not wanted("__transaction_state-7/00000000000000000000.index", "kchaos")
    assert not wanted("kchaos-0/00000000000000000000.index", "kchaos")
    assert not wanted("kchaos-x-0/00000000000000000000.log", "kchaos")
    assert not wanted("__consumer_offsets-3/00000000000000000000.log", "kchaos")
    assert not wanted("meta.properties", "kchaos")


def test_collect_caps_topic_data_per_node_and_records_errors(tmp_path):
    small = [("kchaos-0/0.log", 10), ("kchaos-0/leader-epoch-checkpoint", 8), ("kchaos-0/0.index", 99),
             ("__cluster_metadata-0/0.log", 50), ("__cluster_metadata-0/quorum-state", 5)]
    big = [("kchaos-0/0.log", 1000), ("__cluster_metadata-0/0.log", 50)]
    cluster = FakeCluster({"n1": small, "n2": big, "n3": small}, broken="n3")
    out = collect(cluster, "kchaos", tmp_path, cap_bytes=500)
    by = {c.node: c for c in out}
    assert sorted(cluster.copied["n1"]) == ["__cluster_metadata-0/0.log", "__cluster_metadata-0/quorum-state",
                                            "kchaos-0/0.log", "kchaos-0/leader-epoch-checkpoint"]
    assert cluster.copied["n2"] == ["__cluster_metadata-0/0.log"] and "cap 500" in by["n2"].skipped
    assert by["n3"].error and "not connected" in by["n3"].error and by["n3"].files == 0
    saved = json.loads((tmp_path / COLLECT_FILE).read_text())
    assert [n["node"] for n in saved["nodes"]] == ["n1", "n2", "n3"] and saved["cap_bytes"] == 500
    assert NodeCopy("n1", 1, 1, 1) == NodeCopy("n1", 1, 1, 1)


# --- clock -------------------------------------------------------------------------------------

def test_history_clock_is_test_json_s_stamp_else_unknown():
    c = history_clock({"history_start_unix_ms": 1795422499248.0})
    assert c == Clock(1795422499248.0, "test.json")
    assert c.to_s(1795422527559) == 28.311 and c.to_unix_ms(1.0) == 1795422500248.0
    assert history_clock({}) == Clock(None, "unknown") and Clock(None, "unknown").to_s(5) is None


# --- explanation -------------------------------------------------------------------------------

def test_last_isr_power_loss_is_explained_by_followers_truncating_to_the_empty_leader(last_isr_run):
    exp = explain(last_isr_run, libs=Path("/nonexistent"), dumper=recorded_dumper(LAST_ISR))
    [r] = exp.ranges
    assert (r.partition, r.first_offset, r.last_offset, len(r.values)) == (0, 0, 7, 8)
    assert (r.leader, r.leader_epoch, r.isr) == ("n1", 0, ("n1", "n2", "n3"))
    assert r.election["epoch"] == 2 and r.election["start_offset"] == 0 and r.election["leader"] == "n1"
    assert r.election["leader_log_end"] == 0 and 53 < r.election["time_s"] < 55
    assert r.election["unclean"] is False  # a clean election: the metadata log's leader is not RECOVERING
    fates = {f.node: f for f in r.replicas}
    assert exp.truncated() == {"n2", "n3"} and fates["n2"].offset == 0 and fates["n2"].source == "server.log"
    assert fates["n1"].status == "lost-unsynced" and fates["n1"].held == 0
    power = [f for f in r.faults if f["f"] == "power-fail"]
    assert power and power[0]["nodes"] == ["n1"] and power[0]["isr"] == ("n1",)
    why = exp.why[0]
    for part in ("offsets 0-7 of p0", "by n1 in leader epoch 0 while ISR = {n1,n2,n3}",
                 "n1 lost power at 39.7 s while ISR = {n1}", "n1 was re-elected with epoch 2",
                 "its log was empty", "n3 and n2 truncated to 0", "no replica holds them now"):
        assert part in why, (part, why)
    saved = load_explanation(last_isr_run)
    assert saved["why"] == exp.why and saved["ranges"][0]["replicas"][1]["status"] == "truncated"
    assert [row["leader_epoch"] for row in saved["timelines"]["0"] if row["leader_epoch"] is not None] == \
        [0, 0, 0, 0, 1, 2, 2, 2]
    segs = [json.loads(x) for x in (last_isr_run / "evidence/segments.jsonl").read_text().splitlines()]
    assert {s["node"] for s in segs} == {"n1", "n2", "n3"} and segs[0]["records"][0] == [0, 204]
    meta = [json.loads(x) for x in (last_isr_run / "evidence/metadata.jsonl").read_text().splitlines()]
    assert any(m["type"] == "broker" and m["kind"] == "fenced" and m["broker"] == 1 for m in meta)
    assert not any("start time" in n for n in exp.notes)  # test.json has it


def test_without_metadata_or_broker_logs_the_explanation_says_unknown(last_isr_run):
    shutil.rmtree(last_isr_run / "nodes")
    (last_isr_run / "dump-metadata.txt").write_text("")
    exp = explain(last_isr_run, libs=Path("/x"), dumper=recorded_dumper(last_isr_run))
    [r] = exp.ranges
    assert r.leader is None and r.election is None and exp.truncated() == set()
    assert "unknown" in exp.why[0] and "no replica holds them now" in exp.why[0]


def test_the_caller_finds_the_kafka_jars_from_test_json(last_isr_run):
    """reports/ never loads clusters/: the jars come from the caller's find_libs, given the run's test.json."""
    seen = []
    dumper = recorded_dumper(LAST_ISR)
    ev = decode(last_isr_run, dumper=lambda libs, *a, **k: seen.append(libs) or dumper(libs, *a, **k),
                find_libs=lambda test: Path("/jars") / test["name"])
    assert seen and set(seen) == {Path("/jars") / json.loads((last_isr_run / "test.json").read_text())["name"]}
    assert any(ev.batches.values()) and not any("jars" in n for n in ev.notes)
    bare = decode(last_isr_run, dumper=dumper)
    assert not any(bare.batches.values()) and any("no Kafka jars to decode with" in n for n in bare.notes)


def test_a_run_decoded_twice_in_one_process_runs_the_tool_once_per_unchanged_file_set(last_isr_run):
    """`kchaos run` decodes a lossy run's files before judging the loss and again to explain it: the second
    decode reads the first one's tool output, unless a file changed."""
    calls = []
    recorded = recorded_dumper(LAST_ISR)

    def dumper(libs, files, cwd, metadata=False):
        calls.append(metadata)
        return recorded(libs, files, cwd, metadata=metadata)

    first = decode(last_isr_run, libs=Path("/x"), dumper=dumper)
    again = decode(last_isr_run, libs=Path("/x"), dumper=dumper)
    assert sorted(calls) == [False, True]  # segments and the metadata log, once each
    assert again.batches == first.batches and again.metadata_node == first.metadata_node
    segment = next((last_isr_run / "evidence" / "raw").rglob("*.log"))
    segment.write_bytes(segment.read_bytes() + b"\0")  # a changed file: read again
    decode(last_isr_run, libs=Path("/x"), dumper=dumper)
    assert len(calls) > 2


def test_a_run_decoded_again_from_unchanged_files_is_neither_decoded_nor_written_again(last_isr_run):
    """A check on a warm Spark and its explanation decode a run once: a second decode of the same files returns what
    the first found, without writing its files again; a caller's changes to what it got stay its own; a removed
    output is written again."""
    dumper = recorded_dumper(LAST_ISR)
    first = decode(last_isr_run, libs=Path("/x"), dumper=dumper)
    segments = last_isr_run / "evidence" / SEGMENTS_FILE
    written = segments.stat().st_mtime_ns
    again = decode(last_isr_run, libs=Path("/x"), dumper=dumper)
    assert segments.stat().st_mtime_ns == written
    assert again.batches == first.batches and again.metadata_node == first.metadata_node
    again.notes.append("the caller's own")
    assert "the caller's own" not in decode(last_isr_run, libs=Path("/x"), dumper=dumper).notes
    segments.unlink()
    third = decode(last_isr_run, libs=Path("/x"), dumper=dumper)
    assert segments.is_file() and third.batches == first.batches


def test_explain_refuses_a_directory_without_evidence(tmp_path, last_isr_run):
    with pytest.raises(EvidenceError, match="no test.json"):
        explain(tmp_path)
    shutil.rmtree(last_isr_run / "evidence")
    with pytest.raises(EvidenceError, match="evidence/raw"):
        decode(last_isr_run)
    assert main(["explain", str(tmp_path / "nope")]) == 3
    assert main(["explain", str(last_isr_run)]) == 3


def test_report_section_shows_the_why_and_the_timeline(last_isr_run):
    exp = explain(last_isr_run, libs=Path("/x"), dumper=recorded_dumper(LAST_ISR))
    html = "\n".join(evidence_section(last_isr_run, load_explanation(last_isr_run)))
    assert ">Evidence</h2>" in html and "<details" in html and "re-elected with epoch 2" in html
    assert "truncated past them" in html and "{n1,n2,n3}" in html and 'href="evidence/explanation.json"' in html
    assert exp.ranges and evidence_section(last_isr_run, None) == []


def test_real_isolated_acks1_leader_acknowledged_after_its_replacement(tmp_path):
    # acks1-isolated-leader on Kafka 3.7.2: n2, cut off at 28.5 s, went on acknowledging after the controller
    # had elected n3 (epoch 1, from offset 290) at 35.9 s; the metadata log alone would name n3.
    src = DATA / "isolated-leader-3.7.2"
    run = tmp_path / "run"
    shutil.copytree(src, run)
    exp = explain(run, libs=Path("/x"), dumper=recorded_dumper(src))
    [r] = exp.ranges
    assert (r.first_offset, r.last_offset, r.leader, r.leader_epoch) == (992, 999, "n2", 0)
    assert r.acked_by_source == "state-change.log and the surviving log"
    assert r.controller_moved_on["leader"] == "n3" and r.controller_moved_on["epoch"] == 1
    assert (r.election["leader"], r.election["epoch"], r.election["start_offset"]) == ("n3", 1, 290)
    assert exp.truncated() == {"n2"}
    assert "n2 truncated to 290 (at 55.4 s)" in exp.why[0] and "n2 was cut off from n1, n3 at 28.5 s" in exp.why[0]


# --- an isolated acks=1 leader, by hand in the tools' real formats ----------------------------

T0 = 1_800_000_000_000  # history start, unix ms


def _stamp(s: float) -> str:
    from datetime import datetime
    t = datetime.fromtimestamp((T0 + s * 1000) / 1000, UTC)
    return t.strftime("[%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}]"


def _batch(offset: int, epoch: int, value: int, ms: int) -> list[str]:
    return [f"baseOffset: {offset} lastOffset: {offset} count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
            f"producerEpoch: -1 partitionLeaderEpoch: {epoch} isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {ms} size: 71 magic: 2 "
            "compresscodec: none crc: 1 isvalid: true",
            f"| offset: {offset} CreateTime: {ms} keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] "
            f"payload: {value}"]


def _meta(offset: int, s: float, record: dict) -> list[str]:
    ms = int(T0 + s * 1000)
    return [f"baseOffset: {offset} lastOffset: {offset} count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
            f"producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {ms} size: 99 magic: 2 "
            "compresscodec: none crc: 1 isvalid: true",
            f"| offset: {offset} CreateTime: {ms} keySize: -1 valueSize: 9 sequence: -1 headerKeys: [] "
            f"payload: {json.dumps(record, separators=(',', ':'))}"]


@pytest.fixture
def isolated_leader_run(tmp_path) -> Path:
    """n1 leads epoch 0 and acknowledges 1..10 (offsets 0-9); cut off at 3 s, it goes on acknowledging
    11..15 (offsets 10-14, acks=1) while the controller elects n2 (epoch 1 from offset 10, at 5 s), which
    acknowledges 16..18; healed at 9 s, n1 follows epoch 1 and truncates to 10."""
    run = tmp_path / "run"
    (run / "evidence" / "raw").mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"topic": {"name": "kchaos"}, "producer": {"acks": "1"},
                                               "versions": {"kafka": "3.7.2"}, "history_start_unix_ms": T0}))
    hist, i = [], 0

    def op(**kw):
        nonlocal i
        hist.append({"index": i, **kw})
        i += 1
    for v, off, s in [*[(v, v - 1, 1 + v / 10) for v in range(1, 11)], *[(v, v - 1, 6 + (v - 11) / 4) for v in
                                                                        range(11, 16)],
                      (16, 10, 6.1), (17, 11, 6.6), (18, 12, 7.1)]:
        op(time=int(s * 1e9) - 1000, process=0, type="invoke", f="send", partition=0, value=v)
        op(time=int(s * 1e9), process=0, type="ok", f="send", partition=0, value=v, offset=off)
    op(time=int(3e9), process="nemesis", type="ok", f="start-partition", nemesis="partition-leader", nodes=["n1"],
       targets=["n1"], grudge={"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]})
    op(time=int(9e9), process="nemesis", type="ok", f="stop-partition", nemesis="partition-leader",
       nodes=["n1", "n2", "n3"])
    hist.sort(key=lambda h: h["time"])
    (run / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in hist))
    write_registry_faults(run, hist)
    (run / "results.json").write_text(json.dumps({"counts": {"lost": 5}, "timeline": {"anomalies": {"lost": [
        {"key": v, "acked_s": None} for v in range(11, 16)]}}}))
    logs = {"n1": [(0.5, "state-change.log", "INFO [Broker id=1] Leader kchaos-0 with topic id Some(T) starts at "
                    "leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [1,2,3]"),
                   (9.5, "state-change.log", "INFO [Broker id=1] Follower kchaos-0 starts at leader epoch 1 from "
                    "offset 15 with partition epoch 1 and high watermark 10. Current leader is 2."),
                   (9.6, "server.log", "INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Truncating "
                    "partition kchaos-0 with TruncationState(offset=10, completed=true) due to leader epoch and "
                    "offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, endOffset=10) "
                    "(kafka.server.ReplicaFetcherThread)"),
                   (9.6, "server.log", "INFO [UnifiedLog partition=kchaos-0, dir=/var/lib/kafka/data] Truncating to "
                    "offset 10 (kafka.log.UnifiedLog)")],
            "n2": [(0.6, "state-change.log", "INFO [Broker id=2] Follower kchaos-0 starts at leader epoch 0 from "
                    "offset 0 with partition epoch 0 and high watermark 0."),
                   (5.1, "state-change.log", "INFO [Broker id=2] Leader kchaos-0 with topic id Some(T) starts at "
                    "leader epoch 1 from offset 10 with partition epoch 1, high watermark 10, ISR [2,3]")],
            "n3": [(0.6, "state-change.log", "INFO [Broker id=3] Follower kchaos-0 starts at leader epoch 0 from "
                    "offset 0 with partition epoch 0 and high watermark 0."),
                   (6.5, "state-change.log", "INFO [Broker id=3] Follower kchaos-0 starts at leader epoch 1 from "
                    "offset 10 with partition epoch 1 and high watermark 10. Current leader is 2.")]}
    seg, meta = [], []
    for n, node in enumerate(("n1", "n2", "n3"), 1):
        d = run / "nodes" / node
        d.mkdir(parents=True)
        (d / "server.properties").write_text(f"node.id={n}\n")
        for s, name, text in logs[node]:
            with open(d / name, "a") as fh:
                fh.write(f"{_stamp(s)} {text}\n")
        raw = run / "evidence" / "raw" / node
        (raw / "kchaos-0").mkdir(parents=True)
        (raw / "__cluster_metadata-0").mkdir()
        (raw / "kchaos-0" / "00000000000000000000.log").write_bytes(b"")
        (raw / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"")
        (raw / "kchaos-0" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 10\n")
        seg += [f"Dumping {node}/kchaos-0/00000000000000000000.log", "Log starting offset: 0"]
        for v in range(1, 11):
            seg += _batch(v - 1, 0, v, T0 + 1000 + v * 100)
        for off, v in ((10, 16), (11, 17), (12, 18)):
            seg += _batch(off, 1, v, T0 + 6000)
        meta += [f"Dumping {node}/__cluster_metadata-0/00000000000000000000.log", "Log starting offset: 0"]
        meta += _meta(0, 0.1, {"type": "TOPIC_RECORD", "version": 0, "data": {"name": "kchaos", "topicId": "T"}})
        meta += _meta(1, 0.1, {"type": "PARTITION_RECORD", "version": 1, "data": {
            "partitionId": 0, "topicId": "T", "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1,
            "leaderEpoch": 0, "partitionEpoch": 0}})
        meta += _meta(20, 5.0, {"type": "PARTITION_CHANGE_RECORD", "version": 1, "data": {
            "partitionId": 0, "topicId": "T", "isr": [2, 3], "leader": 2}})
        meta += _meta(21, 5.0, {"type": "BROKER_REGISTRATION_CHANGE_RECORD", "version": 0, "data": {
            "brokerId": 1, "brokerEpoch": 5, "fenced": 1}})
        meta += _meta(30, 9.8, {"type": "PARTITION_CHANGE_RECORD", "version": 1, "data": {
            "partitionId": 0, "topicId": "T", "isr": [2, 3, 1]}})
    (run / "dump-segments.txt").write_text("\n".join(seg) + "\n")
    (run / "dump-metadata.txt").write_text("\n".join(meta) + "\n")
    return run


def test_isolated_acks1_leader_is_named_as_the_replica_that_truncated(isolated_leader_run):
    run = isolated_leader_run
    exp = explain(run, libs=Path("/x"), dumper=recorded_dumper(run))
    [r] = exp.ranges
    assert (r.first_offset, r.last_offset, r.values) == (10, 14, (11, 12, 13, 14, 15))
    # The metadata log says n2 led from 5 s; n1's own state-change.log and the surviving log say n1 acked them.
    assert (r.leader, r.leader_epoch, r.isr) == ("n1", 0, ("n1", "n2", "n3"))
    assert r.acked_by_source == "state-change.log and the surviving log"
    assert r.controller_moved_on == {"leader": "n2", "epoch": 1, "time_s": 5.0}
    assert r.election == {"epoch": 1, "start_offset": 10, "checkpoint_of": "n2", "leader": "n2", "time_s": 5.0,
                          "overwrote": True, "unclean": False, "leader_log_end": 10}
    fates = {f.node: f for f in r.replicas}
    assert exp.truncated() == {"n1"} and (fates["n1"].offset, fates["n1"].time_s) == (10, 9.6)
    # acks=1 followers: n3 said its log ended at 10 after the acknowledgements began; n2 said nothing since.
    assert (fates["n3"].status, fates["n3"].offset, fates["n3"].time_s) == ("did not hold", 10, 6.5)
    assert fates["n2"].status == "unknown"
    why = exp.why[0]
    for part in ("offsets 10-14 of p0 (5 values)", "by n1 in leader epoch 0 while ISR = {n1,n2,n3} as n1 knew it",
                 "from 5.0 s on, the controller had made n2 leader with epoch 1; n1 did not know",
                 "n1 was cut off from n2, n3 at 3.0 s", "n2 was elected with epoch 1 at 5.0 s and its log ended at 9",
                 "n1 truncated to 10 (at 9.6 s)", "n3 (its log ended at 9 at 6.5 s) did not hold them",
                 "no replica holds them now", "for n2 the evidence does not say"):
        assert part in why, (part, why)


def test_a_kept_write_between_lost_ones_splits_the_range(last_isr_run):
    run = last_isr_run
    res = json.loads((run / "results.json").read_text())
    hist = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    [kept] = [h["value"] for h in hist if h.get("type") == "ok" and h.get("offset") == 3 and h["time"] < 20e9]
    res["timeline"]["anomalies"]["lost"] = [a for a in res["timeline"]["anomalies"]["lost"] if a["key"] != kept]
    res["counts"]["lost"] -= 1
    (run / "results.json").write_text(json.dumps(res))
    exp = explain(run, libs=Path("/x"), dumper=recorded_dumper(LAST_ISR))
    assert [(r.first_offset, r.last_offset) for r in exp.ranges] == [(0, 2), (4, 7)]
    assert exp.truncated() == {"n2", "n3"} and exp.lost == exp.listed == 7


def test_a_short_lost_list_is_said(last_isr_run):
    res = json.loads((last_isr_run / "results.json").read_text())
    res["counts"]["lost"] = 196
    (last_isr_run / "results.json").write_text(json.dumps(res))
    exp = explain(last_isr_run, libs=Path("/x"), dumper=recorded_dumper(LAST_ISR))
    assert "results.json lists 8 of 196 lost writes; only those are explained" in exp.notes


# --- Kafka 4.1 (ELR on) ----------------------------------------------------------------------------

ELR = DATA / "elr-4.1.0"


def test_segments_of_4_1_parse_like_3_7():
    notes: list[str] = []
    batches = list(parse_dump((ELR / "dump-segments.txt").read_text().splitlines(), notes))
    assert notes == [] and {b.file for b in batches} == {"n3/kchaos-0/00000000000000000000.log"}
    assert [(b.base_offset, b.leader_epoch, value_of(b.records[0].payload)) for b in batches][-4:] == [
        (184, 0, 175), (185, 1, 179), (186, 1, 180), (187, 1, 181)]
    # The leader-epoch-checkpoint of the same replica: epoch 1 starts at the first epoch-1 batch.
    assert read_epoch_checkpoint(ELR / "leader-epoch-checkpoint") == [(0, 0), (1, 185)]


def test_metadata_of_4_1_carries_elr_and_control_records_as_json():
    batches = list(parse_dump((ELR / "dump-metadata.txt").read_text().splitlines()))
    records = list(metadata_records(batches))
    [control] = [r for r in records if r["type"].startswith("CONTROL:")]
    assert control["type"] == "CONTROL:LeaderChange" and control["data"]["leaderId"] == 1
    log = replay(records)
    assert log.features["eligible.leader.replicas.version"] == 1 and log.features["metadata.version"] == 27
    tl = log.timeline("kchaos", 0)
    # The ISR shrank to the leader n2 with n3 eligible; n2 was fenced and n3, from the ELR, took over.
    assert [(s.leader, s.leader_epoch, s.isr, s.elr) for s in tl] == [
        (2, 0, (2, 3, 1), None), (2, 0, (2, 3), None), (2, 0, (2,), (3,)), (3, 1, (3,), (2,)),
        (3, 1, (3,), ()), (3, 1, (3, 2), ()), (3, 1, (3, 2, 1), ())]
    assert ("fenced", 2) in {(b.kind, b.broker) for b in log.brokers}


def test_broker_logs_of_4_1_parse_like_3_7():
    events = read_node_logs(ELR / "nodes", "kchaos")
    assert ("n3", "leader", 1, 185) in {(e.node, e.kind, e.epoch, e.offset) for e in events}
    assert ("n1", "follower", 1, 175) in {(e.node, e.kind, e.epoch, e.offset) for e in events}
    assert any(e.kind == "loaded" and e.node == "n2" and e.offset == 0 for e in events)
    assert all(e.no_effect for e in events if e.kind == "truncated")  # nothing acknowledged was cut


def test_a_power_failure_after_the_writeback_says_which_node_kept_the_range_on_disk():
    # lazyfs's report on the power-fail line: n3's p0 log was dirty only from 31.2 s (written back before),
    # n1's from 12.0 s; p1's log of n3 lost nothing. The range was acknowledged up to 18.9 s.
    start = 1_700_000_000_000.0
    files = {"n1": [{"path": "kchaos-0/00000000000000000000.log", "oldest_unix_ms": start + 12_000}],
             "n3": [{"path": "kchaos-0/00000000000000000000.log", "oldest_unix_ms": start + 31_200},
                    {"path": "kchaos-0/00000000000000000000.index", "oldest_unix_ms": start + 1_000}]}
    rec = {"index": 9, "time": 61 * 10**9, "process": "nemesis", "type": "ok", "f": "power-fail",
           "nemesis": "power-fail", "nodes": ["n1", "n3"],
           "lost": {n: {"unsynced_bytes": 8192, "files": f} for n, f in files.items()}}
    line = _nemesis_line(rec, FaultCatalogue(), "kchaos", start)
    assert line["dropped_since"] == {"n1": {0: 12.0}, "n3": {0: 31.2}}
    assert _on_disk(line, 0, 18.9) == " (n3 kept them: its p0 log was on disk up to 31.2 s)"
    assert _on_disk(line, 1, 18.9) == (" (n1 kept them: its p1 log had nothing unsynced; "
                                       "n3 kept them: its p1 log had nothing unsynced)")
    assert _on_disk(line, 0, 40.0) == ""
    assert _on_disk({**line, "dropped_since": {}}, 0, 18.9) == ""  # a run without lazyfs's per-file report
    # the demo's power-fail-all, 2026-11-25: a second power failure finds the log empty since the first; an empty
    # log has nothing unsynced, and the node kept nothing
    assert _on_disk(line, 1, 18.9, {"n1": 36.3}) == " (n3 kept them: its p1 log had nothing unsynced)"
    assert _on_disk(line, 1, 18.9, {"n1": 61.0}) == _on_disk(line, 1, 18.9)  # lost in this very failure: as before
