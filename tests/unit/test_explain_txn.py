"""`kchaos explain` for a txn run: the transaction-log decoder's output parsed, and a torn transaction and a G1a
explained end to end from a real run's files (tests/unit/data/evidence/txn-torn-3.7.2: the Java client on Kafka
3.7.2 in txn-delayed-endtxn, its DumpLogSegments output reduced; see the README there)."""
import json
import shutil
from pathlib import Path

import pytest
from test_evidence import _sections

from kchaos.core.workload_kind import kind_of_test
from kchaos.evidence.explain.txn import explain_txn, load_txn_explanation
from kchaos.evidence.explain.txn_text import txn_console_lines, txn_lines
from kchaos.evidence.kafka_logs import parse_dump
from kchaos.evidence.txn_log import txn_states

DATA = Path(__file__).parent / "data" / "evidence"
TORN = DATA / "txn-torn-3.7.2"
TID = "kchaos-2019905031-txn-3"


def recorded_dumper(fixture: Path, calls: list | None = None):
    """Replays the fixture's recorded DumpLogSegments output: the topic's, the coordinators' log (txn_log), and no
    metadata log."""
    seg, txn = (fixture / "dump-segments.txt").read_text(), (fixture / "dump-txn.txt").read_text()

    def dumper(libs, files, cwd, metadata=False, txn_log=False):
        if calls is not None:
            calls.append((sorted(files), metadata, txn_log))
        return [] if metadata else _sections(txn if txn_log else seg, set(files))
    return dumper


@pytest.fixture
def torn_run(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(TORN, run)
    return run


# --- the transaction-log decoder's output -------------------------------------------------------

def _states(name: str):
    notes: list[str] = []
    states = list(txn_states(parse_dump((TORN / name).read_text().splitlines(), notes), notes=notes))
    assert notes == []
    return states


def test_the_3_7_text_form_parses_into_state_changes():
    states = _states("dump-txn.txt")
    assert {s.transactional_id for s in states} == {TID} and {s.partition for s in states} == {49}
    s = next(s for s in states if s.offset == 89)
    assert (s.producer_id, s.producer_epoch, s.state) == (0, 0, "PrepareCommit")
    assert s.partitions == ("kchaos-0", "kchaos-2", "kchaos-1")
    assert (s.time_ms, s.last_update_ms, s.timeout_ms, s.start_ms) == (1795696048520, 1795696048520, 10000, None)
    done = next(s for s in states if s.offset == 90)
    assert done.state == "CompleteCommit" and done.partitions == ()
    assert [s.state for s in states if s.offset >= 91][:2] == ["Empty", "Ongoing"]
    assert next(s for s in states if s.offset == 91).producer_epoch == 1  # a new producer: the epoch bumped


def test_the_4_1_json_form_of_the_same_records_reads_the_same():
    new = {s.offset: s for s in _states("dump-txn-4.1.0.txt")}
    old = {s.offset: s for s in _states("dump-txn.txt")}
    assert sorted(new) == [88, 89, 90]
    for off, s in new.items():
        o = old[off]
        assert (s.transactional_id, s.producer_id, s.producer_epoch, s.state, s.time_ms, s.last_update_ms,
                s.timeout_ms) == (o.transactional_id, o.producer_id, o.producer_epoch, o.state, o.time_ms,
                                  o.last_update_ms, o.timeout_ms)
        assert sorted(s.partitions) == sorted(o.partitions)
    assert new[89].start_ms == 1795696048448  # 4.x also says when the transaction began


def test_a_tombstone_is_dead_and_a_foreign_record_is_a_note():
    lines = ["Dumping n1/__transaction_state-7/00000000000000000000.log",
             "baseOffset: 3 lastOffset: 3 count: 1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 "
             "isTransactional: false isControl: false CreateTime: 5 size: 1",
             "| offset: 3 CreateTime: 5 keySize: 27 valueSize: -1 sequence: -1 headerKeys: [] "
             "key: transaction_metadata::transactionalId=t-1 payload: <DELETE>",
             "| offset: 4 CreateTime: 6 keySize: 3 valueSize: 3 sequence: -1 headerKeys: [] key: abc payload: xyz"]
    notes: list[str] = []
    [s] = list(txn_states(parse_dump(lines), notes=notes))
    assert (s.partition, s.offset, s.transactional_id, s.state, s.producer_id) == (7, 3, "t-1", "Dead", -1)
    assert len(notes) == 1 and "offset 4" in notes[0]


def test_transaction_markers_keep_their_coordinator_epoch_and_batches_their_producer_epoch():
    batches = list(parse_dump((TORN / "dump-segments.txt").read_text().splitlines()))
    marker = next(b for b in batches if b.file.startswith("n1/kchaos-1/") and b.base_offset == 113)
    assert marker.is_control and (marker.producer_id, marker.producer_epoch) == (0, 0)
    assert (marker.records[0].control, marker.records[0].coordinator_epoch) == ("COMMIT", 0)
    data = next(b for b in batches if b.file.startswith("n1/kchaos-1/") and b.base_offset == 111)
    assert data.records[0].payload == "213" and data.records[0].key == "7"
    assert data.to_dict()["producer_epoch"] == 0


# --- a torn transaction and a G1a, end to end --------------------------------------------------------

def test_a_torn_transaction_and_a_g1a_are_explained_from_the_files(torn_run):
    calls: list = []
    assert kind_of_test(json.loads((torn_run / "test.json").read_text())).name == "txn"
    exp = explain_txn(torn_run, libs=Path("/x"), dumper=recorded_dumper(TORN, calls))
    assert any(txn for _, _, txn in calls)  # the coordinators' log was decoded with the decoder
    by = {s.op.index: s for s in exp.stories}
    assert sorted(by) == [274, 407]

    torn = by[407]
    assert torn.op.anomalies == {"torn_transaction": []} and torn.op.outcome == "info"
    f = torn.fates
    assert (f.transactional_id, f.producer_id, f.producer_epoch) == (TID, 0, 0)
    assert {v.value: v.status for v in f.values} == {213: "committed", 219: "committed", 225: "committed",
                                                     231: "not written"}
    assert {e.partition: (e.marker["kind"], e.marker["offset"], e.after_first_ms) for e in f.ends} == {
        0: ("COMMIT", 129, 137), 1: ("COMMIT", 113, 136), 2: ("COMMIT", 132, 137)}
    assert f.decided["state"] == "PrepareCommit" and f.decided["time_s"] == 51.86
    assert [s["state"] for s in f.states][:4] == ["PrepareCommit", "CompleteCommit", "Ongoing", "PrepareCommit"]
    assert torn.previous.index == 401 and torn.kind == "foreign-commit"
    assert torn.cause.startswith("committed in part: the coordinator moved producer 0 epoch 0 to PrepareCommit at "
                                 "51.860 s, 132 ms after value 213, and its COMMIT markers on p0 (offset 129), p1 "
                                 "(113) and p2 (132) came 136–137 ms after value 213")
    assert "value 231 was never written" in torn.cause and "(the previous one: op 401, ok at 51.728 s)" in torn.cause
    assert "KAFKA-17754" in torn.cause and "abort failed: InvalidTxnStateException" in torn.cause

    g1a = by[274]
    assert g1a.op.anomalies == {"G1a": [153]} and g1a.kind == "late-produce"
    v153 = next(v for v in g1a.fates.values if v.value == 153)
    assert (v153.record["offset"], v153.late["kind"], v153.late["offset"], v153.marker["offset"]) == (110, "ABORT",
                                                                                                      104, 112)
    assert g1a.committed_with == {(2, 112): [274, 345]}
    assert "(op 345's)" in g1a.cause and "arrived late" in g1a.cause
    assert {e.partition: e.marker["kind"] for e in g1a.fates.ends} == {0: "ABORT", 1: "ABORT", 2: "ABORT"}

    saved = load_txn_explanation(torn_run)
    assert [t["index"] for t in saved["transactions"]] == [274, 407]
    assert (torn_run / "evidence" / "txn_state.jsonl").is_file()
    lines = txn_lines(saved)
    assert lines[0] == ("2 anomalous transactions (torn_transaction 1, G1a 1): 1 committed by a later transaction "
                        "(op 274); 1 committed in part (op 407)")
    assert any(line.startswith("op 407 [torn_transaction]: process 3, info at 53.964 s") for line in lines)
    assert any("value 231: never written" in line for line in lines)
    assert txn_console_lines(saved)[1].startswith("why: op 274: committed by a later transaction")


def test_without_kafka_jars_the_history_side_is_still_told(torn_run):
    exp = explain_txn(torn_run, dumper=recorded_dumper(TORN))
    assert [s.op.index for s in exp.stories] == [274, 407]
    assert all(s.fates.producer_id is None and s.cause is None for s in exp.stories)
    assert any("no Kafka jars" in n or "DumpLogSegments" in n for n in exp.notes)
    assert "cause: not read off the files" in "\n".join(txn_lines(exp.to_dict()))


def test_a_run_without_anomalies_explains_nothing(torn_run):
    res = json.loads((torn_run / "results.json").read_text())
    res["checkers"]["txn"]["examples"] = {}
    res["checkers"]["txn"]["counts"].update({"G1a": 0, "torn_transaction": 0})
    (torn_run / "results.json").write_text(json.dumps(res))
    calls: list = []
    exp = explain_txn(torn_run, libs=Path("/x"), dumper=recorded_dumper(TORN, calls))
    assert exp.stories == () and calls == [] and txn_lines(exp.to_dict()) == []


# --- the rules on made-up facts ------------------------------------------------------------------------

def _story(outcome, values, ends=(), decided=None, began=None, anomalies=None):
    from kchaos.evidence.explain.txn_facts import Send, TxnOp
    from kchaos.evidence.explain.txn_fates import PartitionEnd, TxnFates, TxnStory
    op = TxnOp(10, 1, 1.0, 2.0, outcome, None, tuple(Send(0, v.value, 0, None) for v in values), 0, "{}",
               anomalies or {"lost_write": [v.value for v in values]})
    return TxnStory(op, TxnFates("t", 5, 0, "the records' batches", 1000, values[0].value, list(values),
                                 [PartitionEnd(p, m, None) for p, m in ends], [], decided, began))


def _marker(kind, offset, t):
    return {"node": "n1", "partition": 0, "offset": offset, "time_ms": t, "time_s": t / 1000, "kind": kind,
            "coordinator_epoch": 2, "producer_id": 5, "producer_epoch": 0}


def _value(v, status, marker=None):
    from kchaos.evidence.explain.txn_fates import ValueFate
    rec = {"node": "n1", "partition": 0, "offset": v, "time_ms": 1000, "time_s": 1.0, "producer_id": 5,
           "producer_epoch": 0, "leader_epoch": 0}
    return ValueFate(v, 0, v, status, None if status == "not written" else rec, marker)


def test_a_committed_transaction_the_coordinator_timed_out_is_said_so():
    from kchaos.evidence.explain.txn_why import cause
    abort = _marker("ABORT", 9, 12000)
    story = _story("ok", [_value(7, "aborted", abort)], [(0, abort)],
                   decided={"state": "PrepareAbort", "time_s": 11.5, "time_ms": 11500, "last_update_ms": 11500,
                            "timeout_ms": 10000},
                   began={"state": "Ongoing", "time_s": 1.0, "time_ms": 1000, "last_update_ms": 1000})
    kind, said = cause(story)
    assert kind == "coordinator-abort"
    assert said == ("the client saw it commit, yet the ABORT marker at p0 offset 9 (12.000 s, coordinator epoch 2) "
                    "aborted value 7, after the coordinator's PrepareAbort at 11.500 s, 10000 ms (its transaction "
                    "timeout) after it began: the coordinator timed it out")


def test_split_markers_open_transactions_and_unexplained_ones():
    from kchaos.evidence.explain.txn_why import cause
    c, a = _marker("COMMIT", 3, 1500), {**_marker("ABORT", 4, 1600), "partition": 1}
    kind, said = cause(_story("info", [_value(1, "committed", c), _value(2, "aborted", a)], [(0, c), (1, a)]))
    assert kind == "split" and said.startswith("its markers disagree: the COMMIT marker at p0 offset 3")
    kind, said = cause(_story("ok", [_value(4, "open")]))
    assert kind == "open" and "value 4 on p0" in said
    assert cause(_story("info", [_value(5, "committed", c)])) is None


def test_a_g1a_on_kafka_4_1_is_read_from_the_json_form_of_the_coordinators_log(tmp_path):
    src = DATA / "txn-g1a-4.1.0"
    run = tmp_path / "run"
    shutil.copytree(src, run)
    exp = explain_txn(run, libs=Path("/x"), dumper=recorded_dumper(src))
    [story] = exp.stories
    assert story.op.index == 73 and story.op.anomalies == {"G1a": [40]} and story.kind == "foreign-commit"
    f = story.fates
    assert (f.transactional_id, f.producer_id, f.producer_epoch) == ("kchaos-773928837-txn-4", 1001, 0)
    assert {v.value: v.status for v in f.values} == {34: "not written", 40: "committed"}
    assert f.decided["state"] == "PrepareCommit" and f.decided["time_s"] == 66.629
    assert {e.partition: (e.marker["kind"], e.marker["offset"]) for e in f.ends} == {0: ("COMMIT", 22),
                                                                                      2: ("COMMIT", 15)}
    assert story.previous.index == 34
    assert story.client_log[-1]["text"].startswith("process 4: abort failed: KafkaError{FATAL,code=INVALID_TXN_STATE")
    assert "716 ms after value 40" in story.cause and "value 34 was never written" in story.cause


def test_report_html_shows_why_each_transaction_broke(torn_run):
    from kchaos.reports.run.report import write_report

    explain_txn(torn_run, libs=Path("/x"), dumper=recorded_dumper(TORN))
    html = write_report(torn_run).read_text()
    why = html[html.index("<h2>Why, from Kafka's files</h2>"):html.index("<h2>Example cycles</h2>")]
    assert "2 anomalous transactions (torn_transaction 1, G1a 1)" in why
    assert "committed in part" in why and "committed by a later transaction" in why
    assert 'href="#op-407"' in why  # the torn transaction's lines are quoted in the page: linked
    assert "value 231: never written" in why  # the facts, behind a details element
