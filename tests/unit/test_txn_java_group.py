"""`--client java` for the txn workload's subscribe mode, `--txn-sub-p` and crash-client: the options now accepted,
the consumer's rebalance events written as librdkafka's lines, a crash cut and replaced over a fake JVM, and the
compiled client's new requests over its real pipe (skipped only where there is no JDK)."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from kchaos.core.config import TestConfig, validate
from kchaos.core.history import History, read_history
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.nemesis import check_spec
from kchaos.workloads.java_client import JavaProcess, group_consumer_props
from kchaos.workloads.rebalance import Rebalance
from kchaos.workloads.txn.java import JavaTxnClient
from kchaos.workloads.txn.java_consumer import JavaConsumerError, JavaTxnConsumer, rebalances

SUBSCRIBE = ("--workload", "txn", "--client", "java", "--consumer-mode", "subscribe")


def cfg(*argv: str) -> TestConfig:
    return validate(config_from_args(build_parser().parse_args(["run", "--seed", "7", *argv])), check_spec)


def lines(path) -> list[tuple]:
    return [(o["process"], o["type"], o["f"], o.get("revoked"), o.get("assigned"), o.get("generation"), o.get("lost"))
            for o in read_history(path)]


# --- options and settings -------------------------------------------------------------------------------------

def test_subscribe_sub_p_and_crash_client_are_accepted_with_the_java_client():
    c = cfg(*SUBSCRIBE, "--txn-sub-p", "0.02", "--nemesis", "crash-client", "--group-protocol", "consumer",
            "--kafka-version", "4.1.0")
    assert (c.workload.client, c.workload.consumer_mode, c.workload.options.sub_p) == ("java", "subscribe", 0.02)


def test_a_java_member_s_settings_follow_the_group_protocol_and_isolation():
    classic = group_consumer_props("b:9092", "txn0", "g", 100, 1500, isolation="read_uncommitted")
    assert classic["group.protocol"] == "classic" and classic["session.timeout.ms"] == "6000"
    assert classic["isolation.level"] == "read_uncommitted" and classic["enable.auto.commit"] == "false"
    kip848 = group_consumer_props("b:9092", "txn0", "g", 100, 1500, protocol="consumer")
    # The Java client refuses the classic protocol's timeouts with group.protocol=consumer: the broker sets them.
    assert kip848["group.protocol"] == "consumer" and "session.timeout.ms" not in kip848
    assert "heartbeat.interval.ms" not in kip848 and kip848["isolation.level"] == "read_committed"


def test_a_reply_s_events_become_rebalances_in_order():
    assert rebalances([{"f": "assign", "partitions": [2, 0], "generation": 3},
                       {"f": "revoke", "partitions": [1], "generation": 4, "lost": True}]) == [
        Rebalance("assign", [0, 2], 3), Rebalance("revoke", [1], 4, True)]


# --- the consumer's lines, over a fake JVM --------------------------------------------------------------------

class FakeJvm:
    """Answers each request as the JVM would, with the events queued for the next reply; records the requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.crashed = False
        self.fail: set[str] = set()
        self.first_txn_events: list[dict[str, Any]] = []  # what the first transaction's polls serve

    def call(self, process: int, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.requests.append(request)
        op = request["op"]
        reply: dict[str, Any] = {"p": process, "ok": op not in self.fail}
        if op in ("assign", "subscribe", "close", "txn"):
            reply["events"], self.events = self.events, []
        if op == "abandon":
            self.crashed = False
        if op == "txn":
            reply["events"] += self.first_txn_events
            self.first_txn_events = []
            done = [["send", m[1], m[2], m[1] % 3, 5] if m[0] == "send" else ["poll", []] for m in request["mops"]]
            if self.crashed:
                reply.update(type="fail", error="crashed (crash-client) before the commit", crashed=True)
            else:
                reply.update(type="ok")
            reply.update(value=done, producer=True, polled=0)
        if op in self.fail:
            reply["error"] = "boom"
        return reply

    def notify(self, process: int, request: dict[str, Any]) -> None:
        self.requests.append(request)
        self.crashed = True


def consumer(tmp_path, *argv: str) -> tuple[JavaTxnConsumer, FakeJvm, History]:
    jvm, h = FakeJvm(), History(tmp_path / "h.jsonl")
    c = JavaTxnConsumer(cfg(*argv), "b:9092", h, 1, call=lambda op, **r: jvm.call(1, {"op": op, **r}, 1))
    return c, jvm, h


def test_a_java_member_s_events_are_librdkafka_s_lines_and_a_sub_p_assign_ends_its_membership(tmp_path):
    c, jvm, h = consumer(tmp_path, *SUBSCRIBE)
    c.start()
    assert jvm.requests[-1]["op"] == "subscribe" and jvm.requests[-1]["consumer"]["group.id"] == "kchaos-7-group"
    assert c.commits_offsets()
    c.record([{"f": "assign", "partitions": [0, 2], "generation": 4},
              {"f": "revoke", "partitions": [2], "generation": 4, "lost": True}])
    jvm.events = [{"f": "revoke", "partitions": [0], "generation": 4}]  # the leaving member's, in its close
    c.assign([1])
    assert jvm.requests[-1] == {"op": "assign", "consumer": c.manual_props, "partitions": [1], "from_start": False}
    assert c.manual_props["group.id"] == "kchaos-7-group" and "group.protocol" not in c.manual_props
    assert not c.commits_offsets()  # a member assigned by hand commits nothing over the group's live members
    c.subscribe()
    h.close()
    assert lines(h.path) == [(1, "ok", "rebalance", [], [0, 2], 4, None), (1, "ok", "rebalance", [2], [], 4, True),
                             (1, "ok", "rebalance", [0], [], 4, None), (1, "ok", "rebalance", [], [1], None, None),
                             (1, "ok", "rebalance", [1], [], None, None)]


def test_assign_mode_starts_from_offset_0_without_a_line_and_again_from_the_committed_offsets(tmp_path):
    c, jvm, h = consumer(tmp_path, "--workload", "txn", "--client", "java")
    c.start()
    assert jvm.requests[-1]["from_start"] is True and jvm.requests[-1]["partitions"] == [0, 1, 2]
    assert jvm.requests[-1]["consumer"]["group.id"] == "kchaos-txn1" and c.commits_offsets()
    c.abandon()
    c.start(again=True)
    assert jvm.requests[-1]["from_start"] is False
    c.close()
    h.close()
    assert lines(h.path) == [(1, "ok", "rebalance", [], [0, 1, 2], None, None)]


def test_a_consumer_the_jvm_could_not_replace_is_an_error_the_sub_p_op_records_as_info(tmp_path):
    jvm = FakeJvm()
    with History(tmp_path / "h.jsonl") as h:
        client = JavaTxnClient(cfg(*SUBSCRIBE), "b:9092", h, 0, lambda *a: None, jvm=jvm)  # type: ignore[arg-type]
        jvm.fail.add("assign")
        with pytest.raises(JavaConsumerError):
            client.reader.assign([0])
        client.resubscribe("assign", [0])
    assert [(o["type"], o["f"]) for o in read_history(tmp_path / "h.jsonl")] == [("invoke", "assign"),
                                                                                   ("info", "assign")]


# --- a crash over a fake JVM ----------------------------------------------------------------------------------

def test_a_crashed_java_process_cuts_its_transaction_abandons_its_clients_and_starts_new_ones(tmp_path):
    jvm = FakeJvm()
    with History(tmp_path / "h.jsonl") as h:
        c = JavaTxnClient(cfg(*SUBSCRIBE, "--rate", "1000"), "b:9092", h, 0, lambda *a: None,
                          jvm=jvm)  # type: ignore[arg-type]
        ran = []

        def stopped() -> bool:
            txns = [r for r in jvm.requests if r["op"] == "txn"]
            if len(txns) == 2 and not ran:
                ran.append(1)
                c.crash(0.0)  # between two transactions: the next one is cut before its commit
            return len(txns) >= 4
        jvm.first_txn_events = [{"f": "assign", "partitions": [0, 1, 2], "generation": 1}]
        c.run(stopped)
    ops = [r["op"] for r in jvm.requests]
    assert ops[:3] == ["open", "subscribe", "init"]
    crash = ops.index("crash")
    assert ops[crash:crash + 5] == ["crash", "txn", "abandon", "subscribe", "init"]  # a new member, a new producer
    assert ops[-1] == "close" and all(r.get("offsets") is True for r in jvm.requests if r["op"] == "txn")
    history = list(read_history(tmp_path / "h.jsonl"))
    assert [(o["type"], o["f"]) for o in history if o["f"] != "rebalance"] == [
        ("invoke", "txn"), ("ok", "txn"), ("invoke", "txn"), ("ok", "txn"),
        ("invoke", "txn"), ("fail", "txn"), ("info", "crash"),
        ("invoke", "txn"), ("ok", "txn")]
    cut = [o for o in history if o["type"] == "fail"][0]
    assert cut["error"] == "crashed (crash-client) before the commit"
    first = history[1]  # the rebalance the first transaction's poll served, recorded before it completed
    assert (first["f"], first["assigned"], first["generation"]) == ("rebalance", [0, 1, 2], 1)


def test_the_crash_notice_reaches_the_jvm_before_the_loop_can_see_it():
    seen: list[bool] = []

    class Jvm(FakeJvm):
        def notify(self, process: int, request: dict[str, Any]) -> None:
            seen.append(client._crash.is_set())
            super().notify(process, request)
    client = JavaTxnClient(cfg(*SUBSCRIBE), "b:9092", None, 0, lambda *a: None, jvm=Jvm())  # type: ignore[arg-type]
    client.crash(2.5)
    assert seen == [False] and client._crash.is_set() and client.restart_after == 2.5


def test_a_crashed_reply_waits_for_the_crash_to_have_set_its_event():
    jvm = FakeJvm()
    client = JavaTxnClient(cfg(*SUBSCRIBE), "b:9092", None, 0, lambda *a: None, jvm=jvm)  # type: ignore[arg-type]
    jvm.crashed = True
    client.reader.record = lambda events: None  # type: ignore[method-assign]
    with client._crashing:  # a crash still between its notice and its event
        t = threading.Thread(target=lambda: client.transact([["send", 1, 0]], abort=False))
        t.start()
        t.join(0.3)
        assert t.is_alive()
        client._crash.set()
    t.join(5)
    assert not t.is_alive() and client._crash.is_set()


# --- the compiled client's pipe -------------------------------------------------------------------------------

def test_the_jvm_answers_the_group_requests_and_reads_a_crash_notice_without_replying(program, tmp_path):
    """Against a loopback port nothing listens on: a KIP-848 member subscribes (no rebalance without a broker), a
    crash notice gets no reply, abandon, a manual assignment and close answer, and the JVM exits 0."""
    c = cfg(*SUBSCRIBE, "--group-protocol", "consumer", "--kafka-version", "4.1.0", "--delivery-timeout-ms", "1500",
            "--request-timeout-ms", "1000")
    jvm = JavaProcess(program)
    try:
        with History(tmp_path / "h.jsonl") as h:
            client = JavaTxnClient(c, "127.0.0.1:1", h, 0, lambda *a: None, jvm=jvm)
            client.open()
            assert client.reader.member and client.reader.commits_offsets()
            client.resubscribe("assign", [0, 2])
            client.crash(0.0)
            assert client._crash.is_set()
            assert client.init() is False  # the reply is init's: the notice had none
            client.resubscribe("subscribe", [])
            client._die(lambda: True)
            assert jvm.call(0, {"op": "txn", "mops": [["poll"]], "abort": False}, 30)["type"] == "fail"
            client.close()
    finally:
        jvm.close()
    assert jvm.proc.returncode == 0
    assert [(o["type"], o["f"]) for o in read_history(tmp_path / "h.jsonl") if o["f"] != "rebalance"] == [
        ("invoke", "assign"), ("ok", "assign"), ("invoke", "subscribe"), ("ok", "subscribe"), ("info", "crash")]
    assert [(o["revoked"], o["assigned"]) for o in read_history(tmp_path / "h.jsonl") if o["f"] == "rebalance"] == [
        ([], [0, 2]), ([0, 2], [])]
