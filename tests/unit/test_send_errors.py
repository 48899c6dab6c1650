"""Sends that did not succeed, counted by Kafka's error name from the history's Parquet form."""
import json

from kchaos.checkers.parquet import convert
from kchaos.checkers.send_errors import MOST, error_name, errors_text, send_errors


def _history(tmp_path, sends):
    lines, t = [], 0
    for i, (type_, error) in enumerate(sends):
        t += 1000
        lines.append({"index": len(lines), "time": t, "process": 0, "type": "invoke", "f": "send", "value": i,
                      "partition": 0})
        t += 1000
        done = {"index": len(lines), "time": t, "process": 0, "type": type_, "f": "send", "value": i, "partition": 0}
        lines.append({**done, **({"offset": i} if type_ == "ok" else {"error": error})})
    h = tmp_path / "history.jsonl"
    h.write_text("".join(json.dumps(x) + "\n" for x in lines))
    convert(h, validate=True)
    return h.with_suffix(".parquet")


def test_sends_are_counted_by_error_name_and_outcome_most_frequent_first(tmp_path):
    parquet = _history(tmp_path, [("ok", None)] * 3 + [("fail", "NOT_ENOUGH_REPLICAS")] * 4
                       + [("info", "_MSG_TIMED_OUT")] * 2 + [("fail", "_MSG_TIMED_OUT")]
                       + [("info", "no delivery report"), ("fail", "produce: BufferError: queue full")])
    errors = send_errors(parquet)
    assert errors == {"NOT_ENOUGH_REPLICAS": {"fail": 4, "info": 0}, "_MSG_TIMED_OUT": {"fail": 1, "info": 2},
                      "no delivery report": {"fail": 0, "info": 1}, "produce": {"fail": 1, "info": 0}}
    assert errors_text(errors, most=2) == "NOT_ENOUGH_REPLICAS 4 failed; _MSG_TIMED_OUT 1 failed, 2 unknown; 2 more"
    assert send_errors(tmp_path / "none.parquet") is None


def test_names_beyond_the_most_frequent_are_summed_as_other(tmp_path):
    parquet = _history(tmp_path, [("fail", f"ERROR_{i:02d}") for i in range(MOST + 3)])
    errors = send_errors(parquet)
    assert len(errors) == MOST + 1 and errors["other"] == {"fail": 3, "info": 0}
    assert [error_name(x) for x in ("NOT_LEADER_OR_FOLLOWER", "produce: x", "", None, "lower case")] == [
        "NOT_LEADER_OR_FOLLOWER", "produce", "unknown", "unknown", "lower case"]
