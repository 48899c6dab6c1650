"""The txn workload's reference checker (checkers/txn/reference.py): each anomaly of docs/checkers.md planted in a
tiny history is found, a clean history has none, and `kchaos check` on a txn run gives the verdict of
docs/verdicts.md."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from histories import write_registry_faults
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers import CheckInputError, check_path, exit_code
from kchaos.checkers.txn.reference import COUNTS, check_txn, parse_ops

RC = {"workload": {"kind": "txn", "options": {"isolation": "read_committed"}}}
RU = {"workload": {"kind": "txn", "options": {"isolation": "read_uncommitted"}}}


class H:
    """A txn history built line by line: `txn(process, type, sends, polls)` adds an invocation and its
    completion; sends are (key, value, partition, offset), polls lists of [p, o, v]."""

    def __init__(self):
        self.ops: list[dict] = []

    def add(self, **op) -> H:
        self.ops.append({"index": len(self.ops), "time": len(self.ops), **op})
        return self

    def txn(self, process: int, type_: str, sends=(), polls=()) -> H:
        mops = [["send", k, v] for k, v, _, _ in sends] + [["poll"] for _ in polls]
        done = [["send", k, v, p, o] for k, v, p, o in sends] + [["poll", list(r)] for r in polls]
        self.add(process=process, type="invoke", f="txn", value=mops)
        return self.add(process=process, type=type_, f="txn", value=done,
                        **({"error": "aborted on purpose"} if type_ == "fail" else {}))

    def drain(self, partition: int, records, complete: bool = True) -> H:
        self.add(process=9, type="invoke", f="drain", partition=partition)
        return self.add(process=9, type="ok", f="drain", partition=partition, records=list(records),
                        complete=complete)

    def check(self, test=RC) -> dict:
        return check_txn(parse_ops(enumerate(self.ops, 1)), test)

    def write(self, run: Path, test=RC) -> Path:
        run.mkdir(parents=True, exist_ok=True)
        (run / "test.json").write_text(json.dumps(test))
        (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in self.ops))
        write_registry_faults(run, self.ops)
        return run


def found(result: dict) -> dict:
    return {k: n for k, n in result["counts"].items() if n}


def clean() -> H:
    """Two committed transactions over two partitions, one aborted one, every committed value read back."""
    return (H().txn(0, "ok", sends=[(0, 10, 0, 0), (1, 11, 1, 0)])
            .txn(1, "fail", sends=[(0, 12, 0, 2)])
            .txn(0, "ok", sends=[(2, 13, 0, 4)], polls=[[[0, 0, 10]]])
            .drain(0, [[0, 0, 10], [0, 4, 13]]).drain(1, [[1, 0, 11]]))


def test_clean_history_has_no_anomaly():
    r = clean().check()
    assert found(r) == {} and r["valid"] is True
    assert (r["stats"]["txn_ok"], r["stats"]["txn_fail"], r["stats"]["committed_sends"]) == (2, 1, 3)


def test_lost_write_is_a_committed_value_below_a_read_offset_that_nobody_read():
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(0, "ok", sends=[(0, 11, 0, 2)])
         .drain(0, [[0, 2, 11]]))
    r = h.check()
    assert found(r) == {"lost_write": 1} and r["examples"]["lost_write"] == [10] and r["valid"] is False


def test_unseen_fails_where_the_final_read_completed_and_is_undecided_where_not():
    h = H().txn(0, "ok", sends=[(0, 10, 0, 0), (1, 11, 1, 0)])
    done = h.check()
    assert found(done) == {"unseen": 2} and done["unseen_undecided"] == 2 and done["valid"] == "unknown"
    h.drain(0, []).drain(1, [], complete=False)  # partition 0 was read to its end and value 10 is not there
    r = h.check()
    assert found(r) == {"unseen": 2} and r["unseen_undecided"] == 1 and r["valid"] is False


def test_G1a_is_an_aborted_value_read_by_a_read_committed_reader():
    h = (H().txn(0, "fail", sends=[(0, 10, 0, 0)]).txn(1, "ok", polls=[[[0, 0, 10]]])
         .drain(0, []))
    assert found(h.check(RC)) == {"G1a": 1}
    under_ru = h.check(RU)  # the same poll under read_uncommitted: expected, labelled aborted_read
    assert found(under_ru) == {"aborted_read": 1} and under_ru["valid"] is True
    h.drain(0, [[0, 0, 10]])  # the final read is read_committed whatever the polls were
    assert found(h.check(RU)) == {"G1a": 1}


def test_torn_transaction_is_a_transaction_partly_visible():
    h = (H().txn(0, "info", sends=[(0, 10, 0, 0), (1, 11, 1, None)])
         .drain(0, [[0, 0, 10]]).drain(1, []))
    r = h.check()
    assert found(r) == {"torn_transaction": 1} and r["examples"]["torn_transaction"] == [0]
    # An info transaction of which nothing is visible did not commit: no anomaly.
    assert found(H().txn(0, "info", sends=[(0, 10, 0, 0)]).drain(0, []).check()) == {}


def test_duplicate_is_a_value_read_at_two_offsets():
    h = H().txn(0, "ok", sends=[(0, 10, 0, 0)]).drain(0, [[0, 0, 10], [0, 1, 10]])
    assert found(h.check()) == {"duplicate": 1}


def test_a_cut_off_transaction_counts_as_info():
    h = clean().add(process=2, type="invoke", f="txn", value=[["send", 0, 99]])
    h.drain(0, [[0, 0, 10], [0, 4, 13], [0, 6, 99]])  # it may have committed: reading it is fine
    assert found(h.check()) == {}


@pytest.mark.parametrize("op, needle", [
    ({"process": 0, "type": "invoke", "f": "txn", "value": [["send", "k", 1]]}, "txn invoke value"),
    ({"process": 0, "type": "ok", "f": "txn", "value": []}, "completes no invocation"),
    ({"process": 0, "type": "done", "f": "txn", "value": []}, "unknown type"),
    ({"process": 9, "type": "ok", "f": "drain", "partition": 0, "records": [[0, 1]]}, "ok drain"),
])
def test_malformed_lines_are_named(op, needle):
    with pytest.raises(CheckInputError, match=f"h:1: .*{needle}"):
        parse_ops([(1, op)], where="h")


def test_a_completion_must_mirror_its_invocation():
    ops = [{"process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1]]},
           {"process": 0, "type": "ok", "f": "txn", "value": [["send", 0, 2, 0, 0]]}]
    with pytest.raises(CheckInputError, match="h:2: completed send"):
        parse_ops(enumerate(ops, 1), where="h")


# --- kchaos check on a txn run --------------------------------------------------------------------------------

@pytest.mark.spark
def test_check_path_judges_a_txn_run_without_parquet(tmp_path):
    run = clean().write(tmp_path / "ok")
    r = check_path(run)
    assert (r["verdict"], r["valid"], exit_code(r["verdict"])) == ("pass", True, 0)
    assert set(r["counts"]) == set(COUNTS) and "txn" in r["checkers"]
    assert json.loads((run / "results.json").read_text())["verdict"] == "pass"
    assert not (run / "history.parquet").exists()
    assert "kafka_errors" not in r  # no node logs


@pytest.mark.spark
def test_check_path_names_the_internal_fault_kafka_logged_and_cannot_pass(tmp_path):
    run = clean().write(tmp_path / "ok")
    (run / "nodes" / "n2").mkdir(parents=True)
    (run / "nodes" / "n2" / "server.log").write_text(
        "[2026-11-26 16:57:32,983] ERROR Encountered metadata publishing fault: Error applying topics delta in "
        "MetadataDelta up to 301 (org.apache.kafka.server.fault.LoggingFaultHandler)\n"
        "java.lang.IllegalStateException: failed transition\n")
    r = check_path(run)
    assert r["verdict"] == "unknown" and r["kafka_errors"]["kinds"]["internal"] == 1
    assert r["undecided"] == ["Kafka reported an internal fault: n2 16:57:32 Encountered metadata publishing fault "
                              "(IllegalStateException), once"]
    assert json.loads((run / "results.json").read_text())["kafka_errors"]["groups"][0]["first"]["node"] == "n2"


@pytest.mark.spark
def test_check_path_fails_a_G1a_and_allows_an_aborted_read(tmp_path):
    h = H().txn(0, "fail", sends=[(0, 10, 0, 0)]).txn(1, "ok", sends=[(2, 11, 0, 1)], polls=[[[0, 0, 10]]])
    h = h.drain(0, [[0, 1, 11]])
    bad = check_path(h.write(tmp_path / "rc", RC))
    assert (bad["verdict"], bad["failed"]) == ("fail", {"G1a": 1})
    fine = check_path(h.write(tmp_path / "ru", RU))
    assert (fine["verdict"], fine["failed"], fine["allowed"]) == ("pass", {}, {"aborted_read": 1})


@pytest.mark.spark
def test_check_path_unknown_when_the_final_read_did_not_complete(tmp_path):
    h = H().txn(0, "ok", sends=[(0, 10, 0, 0)]).drain(0, [], complete=False)
    r = check_path(h.write(tmp_path / "r"))
    assert r["verdict"] == "unknown" and "could not be looked for" in r["undecided"][0]


@pytest.mark.spark
def test_check_path_rejects_a_malformed_txn_history(tmp_path):
    run = clean().write(tmp_path / "bad")
    with open(run / "history.jsonl", "a") as fh:
        fh.write('{"process": 0, "type": "ok", "f": "txn", "value": []}\n')
    with pytest.raises(CheckInputError, match=r"history.jsonl:\d+: ok txn of process 0 completes no invocation"):
        check_path(run)


@pytest.mark.spark
def test_a_bare_txn_history_is_recognised_without_test_json(tmp_path):
    run = clean().write(tmp_path / "bare")
    (run / "test.json").unlink()
    assert check_path(run / "history.jsonl")["verdict"] == "pass"


# --- clean random histories -----------------------------------------------------------------------------------

def simulate(seed: int, n: int, partitions: int, isolation: str) -> H:
    """A history of a correct Kafka: every transaction's sends are appended to the partition logs (aborted ones
    too); committed ones, and info ones the coin says committed, become visible as a whole; polls return
    records a consumer of that isolation level could see, in order; the final read returns every visible one."""
    rng = random.Random(seed)
    logs: dict[int, list[tuple[int, int, bool]]] = {p: [] for p in range(partitions)}  # (offset, value, visible)
    ends = {p: 0 for p in range(partitions)}
    positions = {proc: {p: 0 for p in range(partitions)} for proc in range(3)}
    h, value = H(), 0
    for _ in range(n):
        proc = rng.randrange(3)
        type_ = rng.choice(["ok", "ok", "fail", "info"])
        visible = type_ == "ok" or (type_ == "info" and rng.random() < 0.5)
        sends, polls = [], []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.5:
                k = rng.randrange(2 * partitions)
                p = k % partitions
                sends.append((k, value, p, ends[p]))
                logs[p].append((ends[p], value, None))  # decided when the transaction ends
                ends[p] += 1
                value += 1
            else:
                records = []
                for p in range(partitions):
                    for o, v, vis in logs[p]:
                        if o >= positions[proc][p] and (vis or isolation == "read_uncommitted"):
                            records.append([p, o, v])
                            positions[proc][p] = o + 1
                polls.append(records)
        for p in logs:
            logs[p] = [(o, v, visible if vis is None else vis) for o, v, vis in logs[p]]
            ends[p] += 1  # the commit or abort marker
        h.txn(proc, type_, sends=[(k, v, p, o if type_ != "info" or visible else None) for k, v, p, o in sends],
              polls=polls)
    for p, log in logs.items():
        h.drain(p, [[p, o, v] for o, v, vis in log if vis])
    return h


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 60), st.integers(1, 4))
def test_a_clean_read_committed_history_has_no_anomaly(seed, n, partitions):
    r = simulate(seed, n, partitions, "read_committed").check(RC)
    assert found(r) == {} and r["valid"] is True


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 60), st.integers(1, 4))
def test_a_clean_read_uncommitted_history_has_only_aborted_and_precommitted_reads(seed, n, partitions):
    r = simulate(seed, n, partitions, "read_uncommitted").check(RU)  # a read_uncommitted poll sees its own sends
    assert set(found(r)) <= {"aborted_read", "precommitted_read"} and r["valid"] is True


def test_the_example_of_docs_history_md_parses():
    text = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
    block = text.split("## The txn workload", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    ops = [json.loads(line) for line in block.strip().splitlines()]
    r = check_txn(parse_ops(enumerate(ops, 1)), RC)
    assert (r["stats"]["txn_ok"], r["stats"]["txn_fail"], r["stats"]["partitions_complete"]) == (1, 1, [1])
    assert found(r) == {"unseen": 1} and r["unseen_undecided"] == 1  # value 4: partition 2 was never drained
