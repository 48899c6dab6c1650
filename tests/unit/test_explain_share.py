"""`kchaos explain` for a share run: the share coordinators' log as `--share-group-state-decoder` prints it, and
records whose delivery count went back explained end to end from a real run's files
(tests/unit/data/evidence/share-regressed-4.4.0: `--workload share --nemesis kill:share-coordinator --seed 49`
on Kafka 4.4.0, the history and the monitor's samples reduced to partition 0's first three records, the
`__share_group_state-2` segments of the three brokers as they were collected, and DumpLogSegments' output of
them)."""
import json
import shutil
from pathlib import Path

import pytest

from kchaos.core.workload_kind import kind_of
from kchaos.evidence.explain.share import _after_done, _regressed, explain_share, load_share_explanation, share_lines
from kchaos.evidence.kafka_logs import dump, parse_dump
from kchaos.evidence.share_log import SHARE_STATE_FILE, share_states

RUN = Path(__file__).parent / "data" / "evidence" / "share-regressed-4.4.0"
TOPIC_ID = "tdodzsLuRduN0JTGgzNG4g"
LIBS = Path.home() / ".cache" / "kchaos" / "kafka-4.4.0" / "libs"


def recorded_dumper(calls: list | None = None):
    text = (RUN / "dump-share.txt").read_text().splitlines()

    def dumper(libs, files, cwd, share_log=False, **kw):
        if calls is not None:
            calls.append((sorted(files), share_log))
        return text if share_log else []
    return dumper


@pytest.fixture
def run(tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(RUN, out)
    return out


def test_the_share_state_decoders_text_parses_into_snapshots_and_updates():
    notes: list[str] = []
    states = list(share_states(parse_dump((RUN / "dump-share.txt").read_text().splitlines(), notes), 2, notes))
    assert notes == [] and states
    assert {(s.group, s.topic_id, s.partition, s.state_partition) for s in states} == {
        ("kchaos-share-49", TOPIC_ID, 0, 2)}
    first = states[0]
    assert (first.kind, first.state_epoch, first.start_offset, first.batches) == ("snapshot", 2, -1, ())
    done = next(s for s in states if s.covering(0))
    assert done.kind == "update" and done.covering(0) == ("acknowledged", 1) and done.state_epoch is None
    assert done.covering(10 ** 9) is None


@pytest.mark.skipif(not LIBS.is_dir(), reason="no Kafka 4.4.0 jars in the cache")
def test_kafkas_own_tool_prints_what_the_fixture_recorded():
    raw = RUN / "evidence" / "raw"
    files = sorted(str(f.relative_to(raw)) for f in raw.glob("*/__share_group_state-*/*.log"))
    assert dump(LIBS, files, raw, share_log=True) == (RUN / "dump-share.txt").read_text().splitlines()


def test_a_delivery_count_that_went_back_is_explained_from_the_coordinators_log(run):
    calls: list = []
    exp = explain_share(run, libs=Path("/x"), dumper=recorded_dumper(calls))
    assert calls and all(share_log for _, share_log in calls)
    assert exp["topic_id"] == TOPIC_ID and exp["notes"] == []
    assert [g["cause"] for g in exp["groups"]] == ["acquisition_unwritten"]
    assert sorted((r["partition"], r["offset"]) for r in exp["records"]) == [(0, 0), (0, 1), (0, 2)]
    r = next(r for r in exp["records"] if r["offset"] == 0)
    assert [d["count"] for d in r["deliveries"]] == [1, 1]
    assert [(a["kind"], a["outcome"]) for a in r["acks"]] == [("accept", "info"), ("accept", "ok")]
    assert any(f["f"] == "kill" and f["nodes"] == ["n2"] for f in r["faults"])
    first, later = r["deliveries"][0]["t"], r["deliveries"][1]["t"]
    assert not any(s.get("count") for s in r["state"] if s["t"] < later)  # nothing written between the deliveries
    assert r["state"][0]["t"] >= later and r["state"][-1]["state"] == "below the start offset"
    assert [x["leader"] for x in r["leaders"]] == [2, 3] and r["leaders"][0]["t"] < first
    assert load_share_explanation(run) == exp
    assert (run / "evidence" / SHARE_STATE_FILE).read_text().count("\n") == len(
        list(share_states(parse_dump((RUN / "dump-share.txt").read_text().splitlines()), 2))) // 3
    lines = share_lines(exp)
    assert lines[0].startswith("3 records: its earlier acquisition was never written")
    assert "    delivered: " in "\n".join(lines) and "    partition leader: 2 from" in "\n".join(lines)


def test_without_kafkas_jars_the_records_are_told_and_the_log_is_a_note(run):
    exp = explain_share(run)
    assert len(exp["records"]) == 3 and all(r["state"] == [] for r in exp["records"])
    assert any("not decoded" in n for n in exp["notes"])


@pytest.mark.parametrize("state, cause", [
    ([], "release_unwritten"),  # count 1, 2, then 1: the release before count 2 never reached the log
    ([{"t": 1.5, "count": 1, "at": "__share_group_state-0@4"}], "acquisition_unwritten"),  # the release was written
    ([{"t": 1.5, "count": 2, "at": "__share_group_state-0@4"}], "written_then_lost"),
    ([{"t": 3.5, "count": 2, "at": "__share_group_state-0@4"}], "release_unwritten"),  # written after it
])
def test_a_regression_is_blamed_on_the_log_only_when_the_log_held_the_higher_count(state, cause):
    deliveries = [{"t": 1.0, "process": 4, "count": 1}, {"t": 2.0, "process": 5, "count": 2},
                  {"t": 3.0, "process": 6, "count": 1}]
    assert _regressed(deliveries, state)[0] == cause


def test_a_count_that_came_back_equal_needs_no_missing_release():
    deliveries = [{"t": 1.0, "process": 4, "count": 1}, {"t": 3.0, "process": 6, "count": 1}]
    assert _regressed(deliveries, [])[0] == "acquisition_unwritten"
    deliveries = [{"t": 1.0, "process": 4, "count": 1}, {"t": 2.0, "process": 5, "count": 2},
                  {"t": 3.0, "process": 6, "count": 2}]
    assert _regressed(deliveries, [{"t": 1.5, "count": 1, "at": "__share_group_state-0@4"}])[0] == \
        "acquisition_unwritten"


def test_the_share_workload_explains_a_run_with_any_share_anomaly():
    explainer = kind_of("share").explainer
    assert explainer.wanted({"delivery_count_regressed": 1}) and not explainer.wanted({"redelivered": 9})
    assert json.loads((RUN / "results.json").read_text())["checkers"]["share"]["examples"]


@pytest.mark.parametrize("kind, state, cause", [
    ("accept", [], "done_never_written"),
    ("accept", [{"t": 1.5, "state": "available", "count": 1, "at": "__share_group_state-0@3"}], "done_never_written"),
    ("accept", [{"t": 1.5, "state": "acknowledged", "count": 1, "at": "__share_group_state-0@3"}],
     "done_then_redelivered"),
    ("accept", [{"t": 2.5, "state": "acknowledged", "count": 1, "at": "__share_group_state-0@3"}],
     "done_never_written"),  # written only after it came back
    ("reject", [{"t": 1.5, "state": "archived", "count": 1, "at": "__share_group_state-0@3"}], "done_then_redelivered"),
    ("reject", [{"t": 1.5, "state": "acknowledged", "count": 1, "at": "__share_group_state-0@3"}],
     "done_never_written"),
])
def test_a_redelivery_after_a_committed_acknowledgement_is_told_by_what_the_log_held(kind, state, cause):
    deliveries = [{"t": 1.0, "process": 4, "count": 1}, {"t": 2.0, "process": 5, "count": 2}]
    acks = [{"t": 1.2, "process": 4, "kind": "release", "outcome": "ok"},
            {"t": 1.3, "process": 4, "kind": kind, "outcome": "ok"}]
    got, why = _after_done(kind, deliveries, acks, state)
    assert got == cause and f"{kind.upper()} committed at 1.3 s" in why
    assert _after_done(kind, deliveries, [{**acks[1], "outcome": "info"}], state)[0] == "unexplained"
