"""The nemesis driver records every fault, turns unappliable faults into `info`, and heals once."""
import threading
import time

from kchaos.core.config import TestConfig
from kchaos.core.history import History, read_history
from kchaos.nemesis.base import FaultSkipped, ScheduledOp
from kchaos.nemesis.driver import NemesisDriver


class Recorder:
    """A nemesis that remembers what it was asked to do."""

    name = "rec"

    def __init__(self, cluster, cfg):
        self.calls, self.healed = [], 0
        self.invoked = threading.Event()  # set by the first invoke: the test waits on it, not on the clock

    def setup(self, cluster, history):
        pass

    def invoke(self, op):
        self.calls.append(op)
        self.invoked.set()
        if op["f"] == "skip":
            raise FaultSkipped("no leader")
        if op["f"] == "boom":
            raise RuntimeError("docker went away")
        return {"node": "n2"}

    def teardown(self):
        self.healed += 1


def test_schedule_is_played_and_recorded_in_order(tmp_path):
    h = History(tmp_path / "h.jsonl")
    sched = [ScheduledOp(0.02, "rec", {"f": "kill", "partition": 1}), ScheduledOp(0.0, "rec", {"f": "skip"}),
             ScheduledOp(0.04, "rec", {"f": "boom"})]
    d = NemesisDriver({"rec": Recorder(None, TestConfig())}, None, h, sched, "t")
    d.start()
    d._thread.join(5)
    d.stop_and_heal()
    d.stop_and_heal()
    h.close()
    recs = [(r["type"], r["f"], r.get("node"), r.get("error")) for r in read_history(tmp_path / "h.jsonl")]
    assert recs == [("invoke", "skip", None, None), ("info", "skip", None, "no leader"),
                    ("invoke", "kill", None, None), ("ok", "kill", "n2", None),
                    ("invoke", "boom", None, None), ("info", "boom", None, "RuntimeError: docker went away"),
                    ("invoke", "heal", None, None), ("ok", "heal", None, None)]
    assert d.nemeses["rec"].healed == 1 and d.applied == 1


class FullIsr:
    """A cluster whose partition 0 keeps all three replicas in sync, so an `await_isr: 1` never holds."""

    nodes = ("n1", "n2", "n3")

    def bootstrap(self):
        return "unused:9092"

    def node_of(self, broker):
        return f"n{broker}"


def test_await_isr_is_held_by_the_driver_and_recorded(tmp_path, monkeypatch):
    from kchaos.clusters import admin
    isr = iter([(1, 2, 3), (1,)])
    monkeypatch.setattr(admin, "partitions",
                        lambda *a, **k: {0: admin.PartitionState(0, 1, (1, 2, 3), next(isr))})
    h = History(tmp_path / "h.jsonl")
    d = NemesisDriver({"rec": Recorder(None, TestConfig())}, FullIsr(), h, [], "t")
    out = d.apply("rec", {"f": "kill", "await_isr": 1, "await_s": 5})
    assert out["node"] == "n2" and out["awaited_isr"] == ["n1"] and 0 < out["awaited_s"] < 5
    h.close()


def test_stop_and_heal_cuts_an_await_isr_wait_short(tmp_path, monkeypatch):
    from kchaos.clusters import admin
    waiting = threading.Event()  # the driver has asked for the ISR: it is in the wait

    def partitions(*a, **k):
        waiting.set()
        return {0: admin.PartitionState(0, 1, (1, 2, 3), (1, 2, 3))}

    monkeypatch.setattr(admin, "partitions", partitions)
    h = History(tmp_path / "h.jsonl")
    rec = Recorder(None, TestConfig())
    d = NemesisDriver({"rec": rec}, FullIsr(), h, [ScheduledOp(0.0, "rec", {"f": "kill", "await_isr": 1,
                                                                           "await_s": 60})], "t")
    d.start()
    assert waiting.wait(30)
    t0 = time.monotonic()
    d.stop_and_heal()
    assert time.monotonic() - t0 < 10  # the wait would hold the heal for the op's 60 s
    h.close()
    recs = [(r["type"], r["f"], r.get("error")) for r in read_history(tmp_path / "h.jsonl")]
    assert recs[:2] == [("invoke", "kill", None),
                        ("info", "kill", "the run stopped while the fault waited for the ISR of partition 0")]
    assert rec.calls == [] and rec.healed == 1  # the fault never fired, and the heal still ran


class Roll(Recorder):
    """A nemesis whose ops are steps of one change: the driver plays them to the end."""

    name = "roll"
    finish_schedule = True


def _played(tmp_path, finish: bool) -> list[tuple[str, str]]:
    h = History(tmp_path / f"h{finish}.jsonl")
    sched = [ScheduledOp(0.0, "roll", {"f": "upgrade"}), ScheduledOp(30, "rec", {"f": "kill"}),
             ScheduledOp(31, "roll", {"f": "upgrade"}), ScheduledOp(32, "roll", {"f": "finalize"})]
    roll = Roll(None, TestConfig())
    d = NemesisDriver({"rec": Recorder(None, TestConfig()), "roll": roll}, None, h, sched, "t")
    d.start()
    assert roll.invoked.wait(30)  # the first op played; the rest lie past the "time limit"
    d.stop_and_heal(finish=finish)
    h.close()
    return [(r["nemesis"], r["f"]) for r in read_history(h.path) if r["type"] == "ok"]


def test_a_roll_cut_by_the_time_limit_is_finished_before_the_heal_but_not_when_interrupted(tmp_path):
    assert _played(tmp_path, True) == [("roll", "upgrade"), ("roll", "upgrade"), ("roll", "finalize"),
                                       ("rec", "heal"), ("roll", "heal")]
    assert _played(tmp_path, False) == [("roll", "upgrade"), ("rec", "heal"), ("roll", "heal")]
