"""The nemesis driver records every fault, turns unappliable faults into `info`, and heals once."""
from harness.config import TestConfig
from harness.history import History, read_history
from nemesis.base import FaultSkipped, ScheduledOp
from nemesis.driver import NemesisDriver


class Recorder:
    """A nemesis that remembers what it was asked to do."""

    name = "rec"

    def __init__(self, cluster, cfg):
        self.calls, self.healed = [], 0

    def setup(self, cluster, history):
        pass

    def invoke(self, op):
        self.calls.append(op)
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
    d = NemesisDriver({"rec": Recorder(None, TestConfig())}, None, h, sched)
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
