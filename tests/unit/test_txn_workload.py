"""The txn workload without a cluster: its options, its seeded ops, and how each way a transaction can end is
recorded (ok, fail, info), with a stand-in producer and consumer in place of confluent-kafka's."""
from __future__ import annotations

import logging
import random
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kchaos.core.config import ConfigError, TestConfig, validate
from kchaos.core.workload_kind import kind_of
from kchaos.harness.cli.main import build_parser, main
from kchaos.harness.options import config_from_args
from kchaos.nemesis import check_spec
from kchaos.workloads.txn.client import MAX_MICRO_OPS, TxnClient, draw_txn
from kchaos.workloads.txn.workload import TxnWorkload


def cfg(*argv: str) -> TestConfig:
    return validate(config_from_args(build_parser().parse_args(["run", "--seed", "7", *argv])), check_spec)


# --- options ---------------------------------------------------------------------------------------------------

def test_workload_txn_is_registered_and_turns_idempotence_on():
    c = cfg("--workload", "txn", "--txn-isolation", "read_uncommitted", "--txn-abort-p", "0.25")
    assert isinstance(kind_of(c.workload.kind).make(c), TxnWorkload)
    assert (c.workload.options.isolation, c.workload.options.abort_p, c.producer.idempotence) == (
        "read_uncommitted", 0.25, True)
    assert TestConfig.from_dict(c.to_dict()) == c


def test_a_queue_runs_test_json_has_no_txn_settings():
    assert cfg().to_dict()["workload"]["options"] == {"group_commit": "sync"}
    with pytest.raises(ConfigError, match="--txn-isolation applies to --workload txn or copy only"):
        cfg("--txn-isolation", "read_uncommitted")


@pytest.mark.parametrize("argv, needle", [
    (["--workload", "txn", "--txn-isolation", "serializable"], "--txn-isolation must be one of"),
    (["--workload", "txn", "--txn-abort-p", "1.5"], r"--txn-abort-p must be a fraction in \[0, 1\]"),
    (["--workload", "txn", "--in-flight", "2"], "it takes no --in-flight"),
    (["--workload", "txn", "--acks", "1"], "--idempotence needs --acks all"),
])
def test_bad_txn_options_are_refused(argv, needle):
    with pytest.raises(ConfigError, match=needle):
        cfg(*argv)


def test_idempotence_off_is_refused_for_a_txn_config_from_test_json():
    d = cfg("--workload", "txn").to_dict()
    d["producer"]["idempotence"] = False
    with pytest.raises(ConfigError, match="--workload txn needs --idempotence"):
        TestConfig.from_dict(d)


@pytest.mark.parametrize("argv, needle", [
    (["--workload", "txns"], "unknown workload 'txns'"),
    (["--workload", "txn", "--txn-abort-p", "-1"], "--txn-abort-p"),
])
def test_cli_bad_txn_input_exits_3_in_one_line_before_creating_anything(tmp_path, capsys, argv, needle):
    store = tmp_path / "store"
    code = main(["run", *argv, "--store", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and needle in err[0]
    assert not store.exists()


# --- ops ------------------------------------------------------------------------------------------------------

def draw(seed: int) -> list[list[list]]:
    values, rng = iter(range(10**6)), random.Random(seed)
    return [draw_txn(rng, 3, lambda: next(values)) for _ in range(200)]


def test_ops_are_seeded_and_shaped_as_jepsen_s():
    ops = draw(5)
    assert ops == draw(5) != draw(6)
    assert all(1 <= len(op) <= MAX_MICRO_OPS for op in ops)
    flat = [m for op in ops for m in op]
    assert {m[0] for m in flat} == {"send", "poll"} and all(m == ["poll"] or 0 <= m[1] < 12 for m in flat)
    sent = [m[2] for m in flat if m[0] == "send"]
    assert len(sent) == len(set(sent))


def test_values_are_unique_across_processes():
    c = cfg("--workload", "txn", "--producers", "3")
    clients = [TxnClient(c, "x:9092", None, p, lambda *a: None) for p in range(3)]
    drawn = [next(cl._values) for cl in clients for _ in range(50)]
    assert len(drawn) == len(set(drawn))


# --- how a transaction ends -----------------------------------------------------------------------------------

class Msg:
    def __init__(self, p: int, o: int, v: int):
        self.p, self.o, self.v = p, o, v

    def error(self):
        return None

    def partition(self):
        return self.p

    def offset(self):
        return self.o

    def value(self):
        return str(self.v).encode()


class FakeProducer:
    """Delivers each record at the next offset of its partition; `fail_at` names the call that raises."""

    def __init__(self, fail_at: str | None = None, error: KafkaError | None = None):
        self.fail_at, self.error, self.calls, self.pending, self.ends = fail_at, error, [], [], {}

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_at:
            raise KafkaException(self.error)

    def begin_transaction(self):
        self._call("begin")

    def produce(self, topic, key, value, partition, on_delivery):
        self._call("produce")
        self.pending.append((partition, int(value), on_delivery))

    def flush(self, timeout):
        for p, v, cb in self.pending:
            o = self.ends.get(p, 0)
            self.ends[p] = o + 1
            cb(None, Msg(p, o, v))
        self.pending = []
        return 0

    def poll(self, timeout):
        return 0

    def send_offsets_to_transaction(self, positions, meta, timeout):
        self._call("send_offsets")

    def commit_transaction(self, timeout):
        self._call("commit")

    def abort_transaction(self, timeout):
        self.calls.append("abort")


class FakeConsumer:
    def consume(self, num_messages, timeout):
        return [Msg(0, 4, 40)]

    def assignment(self):
        return [TopicPartition("kchaos", 0)]

    def position(self, tps):
        return [TopicPartition("kchaos", 0, 5)]

    def consumer_group_metadata(self):
        return object()


def client(producer: FakeProducer) -> TxnClient:
    c = TxnClient(cfg("--workload", "txn"), "x:9092", None, 0, lambda *a: None)
    c.producer, c.reader.consumer = producer, FakeConsumer()
    return c


MOPS = [["send", 1, 100], ["poll"], ["send", 4, 101]]


def test_a_committed_transaction_records_each_send_s_offset_and_each_poll():
    p = FakeProducer()
    type_, done, error = client(p).transact(MOPS, abort=False)
    assert (type_, error) == ("ok", None)
    assert done == [["send", 1, 100, 1, 0], ["poll", [[0, 4, 40]]], ["send", 4, 101, 1, 1]]
    assert p.calls == ["begin", "produce", "produce", "send_offsets", "commit"]


def test_an_abort_on_purpose_fails_and_never_commits():
    p = FakeProducer()
    type_, _, error = client(p).transact(MOPS, abort=True)
    assert (type_, error) == ("fail", "aborted on purpose") and "commit" not in p.calls


def abortable(code=KafkaError._STATE):
    return KafkaError(code, "abortable", txn_requires_abort=True)


@pytest.mark.parametrize("fail_at, error, outcome, kept", [
    ("produce", abortable(), "fail", True),  # before the commit was asked for: it can never commit
    ("send_offsets", KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True), "fail", False),
    ("commit", abortable(), "fail", True),  # the commit was refused, and the abort confirmed
    ("commit", KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True), "info", False),
    ("commit", KafkaError(KafkaError._FENCED, "fenced", fatal=True), "info", False),
])
def test_errors_end_as_fail_only_when_the_transaction_certainly_did_not_commit(fail_at, error, outcome, kept):
    p = FakeProducer(fail_at, error)
    c = client(p)
    type_, done, text = c.transact(MOPS, abort=False)
    assert type_ == outcome and text
    assert len(done) == len(MOPS)
    # An error the producer cannot vouch for drops it; the next op's producer fences it (same transactional.id).
    assert (c.producer is p) == kept



class FatalInDeliveryReport(FakeProducer):
    """librdkafka raising a fatal error while it serves a delivery report inside flush: confluent-kafka
    surfaces it as a SystemError caused by the KafkaException."""

    def flush(self, timeout):
        try:
            raise KafkaException(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "sequence desync", fatal=True))
        except KafkaException as e:
            raise SystemError("<slot wrapper '__setitem__' of 'dict' objects> returned a result with an "
                              "exception set") from e


def test_a_fatal_error_inside_a_delivery_report_fails_the_op_and_drops_the_producer():
    p = FatalInDeliveryReport()
    c = client(p)
    type_, done, text = c.transact(MOPS, abort=False)
    assert type_ == "fail" and "sequence desync" in text and len(done) == len(MOPS)
    assert c.producer is None and "commit" not in p.calls


def test_a_system_error_of_another_cause_is_not_taken_for_the_client_s():
    class Broken(FakeProducer):
        def flush(self, timeout):
            raise SystemError("not librdkafka")
    with pytest.raises(SystemError):
        client(Broken()).transact(MOPS, abort=False)

class CrashingProducer(FakeProducer):
    """A FakeProducer whose client is crashed when the call `at` is made (crash-client's flag set meanwhile)."""

    def __init__(self, at: str):
        super().__init__()
        self.at, self.client, self.purged = at, None, False

    def _call(self, name: str) -> None:
        super()._call(name)
        if name == self.at:
            self.client.crash(0.0)

    def purge(self, in_queue, in_flight, blocking):
        self.purged = True


@pytest.mark.parametrize("at, outcome", [
    ("begin", "fail"),  # crashed before the commit was asked for: the next producer's init aborts it
    ("send_offsets", "fail"),
    ("commit", "info"),  # crashed as the commit returned: the process never learnt the outcome
])
def test_a_crash_ends_the_transaction_in_flight_fail_only_before_the_commit(at, outcome):
    p = CrashingProducer(at)
    c = client(p)
    p.client = c
    type_, done, text = c.transact(MOPS, abort=False)
    assert type_ == outcome and "crash-client" in text and len(done) == len(MOPS)
    assert ("commit" in p.calls) == (outcome == "info")


def test_a_crashed_process_abandons_its_producer_purged_and_records_the_crash(tmp_path):
    from kchaos.core.history import History, read_history
    with History(tmp_path / "h.jsonl") as h:
        c = TxnClient(cfg("--workload", "txn"), "x:9092", h, 0, lambda *a: None)
        p = CrashingProducer("none")
        c.producer, c.reader.consumer = p, FakeConsumer()
        c.reader.start = lambda again=False: None  # no cluster: the new consumer is not made
        c.crash(0.0)
        c._die(lambda: False)
    assert c.producer is None and c.abandoned == [p] and p.purged
    assert c.reader.consumer is None and len(c.reader.abandoned) == 1
    lines = list(read_history(tmp_path / "h.jsonl"))
    assert [(o["process"], o["type"], o["f"]) for o in lines] == [(0, "info", "crash")]


def test_crash_client_picks_a_txn_process():
    w = TxnWorkload(cfg("--workload", "txn"))
    with pytest.raises(ValueError):
        w.crash_client(1, 0.0)  # not started: no process to crash
    crashed = []
    w._clients = {0: type("C", (), {"crash": lambda self, t: crashed.append(t)})()}
    assert w.crash_client(7, 2.0) == {"member": 0, "restart_after": 2.0} and crashed == [2.0]


class _Readying:
    """A process whose first producer is ready once `ready_at` is set (never when it stays None)."""

    def __init__(self) -> None:
        self.ready_at: threading.Event | None = threading.Event()

    def ready(self) -> bool:
        return self.ready_at is not None and self.ready_at.is_set()


def test_the_workload_starts_once_every_process_has_its_first_producer_and_not_before(caplog):
    caplog.set_level(logging.INFO, logger="kchaos.txn")
    w = TxnWorkload(cfg("--workload", "txn"))
    slow, fast = _Readying(), _Readying()
    w._clients = {0: slow, 1: fast}  # type: ignore[dict-item]
    alive = threading.Event()
    w._threads = [threading.Thread(target=alive.wait, daemon=True)]
    w._threads[0].start()
    fast.ready_at.set()  # type: ignore[union-attr]
    waiter = threading.Thread(target=w.await_producers, args=(60,))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), "returned while process 0 had no producer yet"
    slow.ready_at.set()  # type: ignore[union-attr]
    waiter.join(60)
    alive.set()
    assert not waiter.is_alive() and "ready after" in caplog.text


def test_a_process_that_never_gets_a_producer_delays_the_faults_only_up_to_the_bound(caplog):
    w = TxnWorkload(cfg("--workload", "txn"))
    never = _Readying()
    never.ready_at = None
    w._clients = {0: never}  # type: ignore[dict-item]
    alive = threading.Event()
    w._threads = [threading.Thread(target=alive.wait, daemon=True)]
    w._threads[0].start()
    w.await_producers(0.2)
    alive.set()
    assert "1 of 1 clients had no transactional producer" in caplog.text
