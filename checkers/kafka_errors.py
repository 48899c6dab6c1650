"""Kafka's own logs of a run: every ERROR and FATAL line of every node, grouped, classified, explained by the faults.

Jepsen's redpanda tests grep the nodes' logs for assertion failures; this is that check for Kafka. It reads
`nodes/<node>/server.log`, `controller.log` and `state-change.log` of a run directory, whose lines follow the
log4j pattern `[%d] %p %m (%c)%n`: an event is a line `[2026-11-26 16:57:32,983] ERROR message (logger)`, and the
lines after it up to the next `[date time]` line are its stack trace (`java.lang.IllegalStateException: msg`,
indented `at ...` lines, `Caused by: ...`).

Each ERROR or FATAL event gets:

- its *exception*: the class on the first line of its stack trace; without a trace, the first Java class name
  ending in Exception or Error that its message names; else none;
- its *rule*: the first row of RULES whose patterns all match (logger, the exception classes of the trace, the
  message with the trace's exception lines);
- its *status*: `expected` when a fault of one of the rule's families was open at the event's time (from the
  break op's invocation, less WINDOW_BEFORE_MS, to the mend's completion, plus WINDOW_AFTER_MS); otherwise
  `internal` for a rule of class internal, `unexplained` for a rule of class expected or no rule at all.

Events are grouped by (status, rule, logger, exception). Internal groups make the verdict unknown
(`internal_reasons`); unexplained ones are shown and change nothing. docs/checkers.md ("Kafka's own logs") shows
RULES and FAMILIES as tables, and a unit test holds the two to each other.

The API, for results.json, the console and the verdict:

- `kafka_errors(run_dir, spark_master="local[*]") -> dict | None`: the summary (None when the run directory has
  no node logs, e.g. a bare history):
  `{"files", "bytes", "lines", "errors", "fatals",                 # errors, fatals: lines per level
    "windows": bool,                                                # False: faults counted all the run long
    "statuses": {"internal": n, "unexplained": n, "expected": n},  # ERROR/FATAL lines per status
    "kinds": {"internal": g, "unexplained": g, "expected": g},     # groups per status
    "total_groups": G, "listed": L,                                 # groups; the first MAX_GROUPS are listed
    "groups": [{"status", "rule", "why", "logger", "exception", "title", "count", "fatal", "nodes",
                "explained_by": [nemesis specs], "last_time",
                "first": {"node", "file", "line", "time", "t_s", "level", "message", "cause"}}, ...]}`
  `groups` are sorted internal, unexplained, expected, then by first occurrence; `first.file` is relative to
  the run directory and `first.line` is 1-based, for a link into the log; `t_s` is the history's seconds (None
  without the run's clock).
- `errors_line(summary) -> str`: the one console line.
- `internal_reasons(summary) -> list[str]`: a verdict reason per internal group (at most MAX_REASONS, then one
  line for the rest).

Big logs are read by Spark tasks, one per stretch of a file (at most STRETCH_BYTES); a run whose logs total less
than LOCAL_BYTES is read in this process with the same task function, so a small run pays no Spark job.
Log times carry no zone: the node containers run in UTC, so they are read as UTC, as the evidence's broker logs are.
"""
from __future__ import annotations

import calendar
import fnmatch
import json
import math
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kchaos.core.faults import read_faults

if TYPE_CHECKING:
    from kchaos.checkers.history_scan import HistoryScan

__all__ = ["FAMILIES", "LOG_FILES", "RULES", "Family", "Rule", "errors_line", "internal_reasons", "kafka_errors"]

LOG_FILES = ("server.log", "controller.log", "state-change.log")
STATUSES = ("internal", "unexplained", "expected")
STRETCH_BYTES = 32 << 20  # a task's share of one log file, at most
LOCAL_BYTES = 64 << 20  # below this many bytes of logs in all, no Spark job
TAIL_BYTES = 256 << 10  # read past a stretch's end for the stack trace of its last event
WINDOW_BEFORE_MS = 1000
# A restarted broker catches up for a while after its mend completed: one killed in a 3.7.2 run was back in
# every ISR 12 s after its `start`, and a 4.1 controller replayed its log for 23 s after its restart.
WINDOW_AFTER_MS = 30_000
MAX_GROUPS = 50
MAX_REASONS = 5
MAX_MESSAGE = 300
MAX_TITLE = 80
START_UP, SHUTDOWN = "(start-up)", "(shutdown)"
HISTORY_START_KEY = "history_start_unix_ms"  # kchaos.evidence.files's; repeated to keep this module's imports small

Cls = Literal["internal", "expected"]


@dataclass(frozen=True)
class Family:
    """A family of faults: the nemesis packages (the spec before any `:`, fnmatch globs) whose faults explain the
    rules naming it. `(start-up)` and `(shutdown)` are the cluster's start before the history's first client
    line and its stop after the history's last line."""

    name: str
    nemeses: tuple[str, ...]
    what: str


@dataclass(frozen=True)
class Rule:
    """One row of the rules table. Its patterns are regular expressions searched (re.search) in the event's
    logger, in its exception classes (the trace's first class and each `Caused by`, space-separated), and in its
    text (the message, then each exception line of the trace, where `^` matches at the start of each of those
    lines); an empty pattern matches anything. `cls` says what
    the row's events are when none of `families` had a fault open then: internal (the verdict is unknown) or
    expected (then they are unexplained)."""

    name: str
    cls: Cls
    families: tuple[str, ...]
    why: str
    logger: str = ""
    exception: str = ""
    text: str = ""


FAMILIES: tuple[Family, ...] = (
    Family("down", ("kill*", "stop", "rolling-restart", "power-fail*", "torn-write", "disk-full", "upgrade", "wipe",
                    "decommission", "replace-controller", START_UP, SHUTDOWN),
           "a node's Kafka died, stopped or restarted, or the cluster started or stopped"),
    Family("network", ("partition-*", "flaky", "slow-follower", "stall-follower"),
           "messages between nodes were dropped or delayed"),
    Family("slow", ("pause", "cpu-starve", "slow-disk"), "a node's Kafka was frozen or slowed"),
    Family("clock", ("clock-*",), "a node's clock jumped"),
    Family("disk", ("disk-full",), "a node's log directory refused writes"),
    Family("corrupt", ("corrupt", "torn-write", "power-fail*"),
           "bytes of a log directory changed on disk, or a power failure dropped the unsynced ones"),
    Family("client", ("crash-client",), "a client died mid-request"),
    Family("election", ("elect-unclean",), "an operator forced an election"),
    Family("membership", ("reassign", "wipe", "add-broker", "decommission", "remove-controller",
                          "replace-controller"),
           "a replica moved to another broker, a broker or a controller joined or left, or a broker's disk was "
           "replaced"),
)

_COORDINATOR = r"(?:^|\.)coordinator\.(?:group|transaction|share|common)\."
_AWAY = ("down", "network", "slow", "clock")

# First match wins: the specific rows come before the general ones.
RULES: tuple[Rule, ...] = (
    Rule("metadata-publishing", "internal", (),
         "The broker could not apply a metadata update (metadata-apply-error-count) and goes on with the view it had.",
         text=r"^Encountered metadata publishing fault"),
    Rule("metadata-loading", "internal", (),
         "The node could not load metadata records (metadata-load-error-count); its view of the cluster may be wrong.",
         text=r"^Encountered (?:initial broker )?metadata loading fault"),
    Rule("disk-full", "internal", ("disk",),
         "A write failed for lack of space: the log directory goes offline and the broker halts.",
         text=r"No space left on device"),
    Rule("log-dir-failure", "internal", ("disk", "corrupt"),
         "An I/O error on a log directory: Kafka takes the directory offline and stops serving its replicas.",
         logger=r"LogDirFailureChannel$"),
    Rule("log-dir-offline", "internal", ("disk", "corrupt"),
         "The node halts because its log directories failed.",
         text=r"Shutdown broker because all log dirs|Halting broker because dir |couldn't communicate offline log dir"),
    Rule("storage", "internal", ("disk", "corrupt"),
         "A read or write of a log directory failed (KafkaStorageException).",
         exception=r"KafkaStorageException"),
    Rule("fault-handler", "internal", (),
         "One of Kafka's fault handlers fired: a fatal one halts the node, the others leave it running on a "
         "state it could not update.",
         text=r"^Encountered [\w ]+ fault"),
    Rule("coordinator-state", "internal", (),
         "A group, transaction or share coordinator found its own state impossible; its answers may be wrong.",
         logger=_COORDINATOR, exception=r"IllegalStateException"),
    Rule("coordinator-should-not-happen", "internal", (),
         "A coordinator state transition failed in a way Kafka says should not happen.",
         logger=_COORDINATOR, text=r"should not happen"),
    Rule("out-of-memory", "internal", (),
         "The JVM ran out of memory; any thread may have died half-way.",
         exception=r"OutOfMemoryError"),
    Rule("corruption", "internal", ("corrupt",),
         "Kafka read a record batch or index whose bytes fail their checks.",
         exception=r"CorruptRecordException|InvalidRecordException|CorruptIndexException|CorruptSnapshotException"),
    Rule("corruption-message", "internal", ("corrupt",),
         "Kafka read a record batch or index whose bytes fail their checks.",
         text=r"Found invalid messages during fetch|Record is corrupt|Corrupt (?:time )?index found"),
    Rule("not-enough-replicas", "expected", (*_AWAY, "disk"),
         "The ISR shrank below min.insync.replicas while a replica was away; acks=all writes are refused until "
         "it returns.",
         exception=r"NotEnoughReplicas(?:AfterAppend)?Exception"),
    Rule("out-of-order-sequence", "expected", (*_AWAY, "disk", "client"),
         "A leader had no state for an idempotent producer: its earlier batch was lost with the old leader, or the "
         "producer restarted.",
         exception=r"OutOfOrderSequenceException"),
    Rule("leadership-moved", "expected", (*_AWAY, "disk", "election", "membership"),
         "A request reached a node that had just lost, or not yet taken, the leadership it needs.",
         exception=r"NotControllerException|NotLeaderOrFollowerException|NotCoordinatorException"
                   r"|CoordinatorNotAvailableException|CoordinatorLoadInProgressException"
                   r"|LeaderNotAvailableException|FencedLeaderEpochException|StaleBrokerEpochException"),
    Rule("fenced", "expected", (*_AWAY, "client"),
         "A producer or group member was fenced after it, or its coordinator, restarted.",
         exception=r"ProducerFencedException|InvalidProducerEpochException|TransactionCoordinatorFencedException"
                   r"|FencedInstanceIdException"),
    Rule("slow-controller-event", "expected", _AWAY,
         "Kafka 4 logs every controller event slower than 2 s as an error; events wait while the quorum has no "
         "leader.",
         logger=r"EventPerformanceMonitor$"),
    Rule("disconnected", "expected", (*_AWAY, "client"),
         "A peer went away mid-request: it was killed, cut off or frozen.",
         exception=r"DisconnectException|java\.net\.ConnectException|SocketTimeoutException|EOFException"
                   r"|ClosedChannelException|errors\.TimeoutException"),
    Rule("connection-lost", "expected", (*_AWAY, "client"),
         "A peer went away mid-request: it was killed, cut off or frozen.",
         text=r"Connection refused|Connection reset by peer|Broken pipe|disconnected before the response was read"),
    Rule("directory-assignment-refused", "expected", ("down", "membership"),
         "A restarted broker sent its replicas' log directories (KIP-858) before the controller had its new "
         "registration, and was told its broker epoch is stale; it sends them again once registered.",
         text=r"^Failed to propagate directory assignments because the Controller returned error STALE_BROKER_EPOCH"),
    Rule("replica-created", "expected", ("membership",),
         "A broker was handed a replica it did not hold (a reassignment or a new broker put it there, or its disk "
         "was replaced) and created it.",
         text=r"Expected partition \S+ with topic id \S+ to exist, but it was missing\. Creating"),
)

_FAMILY_NAMES = frozenset(f.name for f in FAMILIES)
assert all(set(r.families) <= _FAMILY_NAMES for r in RULES), "a rule names an unknown family"
assert len({r.name for r in RULES}) == len(RULES), "two rules share a name"

# --- the task: one stretch of one log file ------------------------------------------------------------------------
# It travels to Spark's Python workers by value, so it uses only the standard library and this module's globals.

_HIT = re.compile(rb"\] (?:ERROR|FATAL) ")
_HEAD = re.compile(rb"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3})\] (ERROR|FATAL) ")
_NEXT = re.compile(rb"\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ")
_LOGGER = re.compile(r" \(([A-Za-z_$][\w$.\-]*)\)\s*$")
_EXC_LINE = re.compile(r"^(?:Caused by: )?([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\s?(.*))?$")
_NAMED = re.compile(r"\b((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))\b|\b([A-Z][\w$]*(?:Exception|Error))\b")
_HEAD_LEN = 25  # "[2026-11-26 16:57:32,983]"


@dataclass(frozen=True)
class _Job:
    """One stretch: lines starting at bytes [start, end) of the file are the task's."""

    path: str
    node: str
    file: str
    stretch: int
    start: int
    end: int
    rules: tuple[tuple[str, str, str, str, str], ...]  # (name, cls, logger, exception, text)
    explain: tuple[tuple[tuple[float, float, str], ...], ...]  # per rule: (from ms, to ms, nemesis spec)


@dataclass(frozen=True)
class _First:
    time_ms: int
    line: int  # within the stretch, 0-based; the driver adds the lines of the stretches before it
    time: str
    level: str
    message: str
    cause: str | None


@dataclass(frozen=True)
class _Stretch:
    node: str
    file: str
    stretch: int
    lines: int  # lines starting in the stretch
    groups: dict[tuple[str, str, str, str], list[Any]]  # key -> [count, fatal, _First, last_ms, specs]
    errors: int
    fatals: int


def _task(job: _Job) -> _Stretch:
    rules = [(name, cls, re.compile(lg) if lg else None, re.compile(ex) if ex else None,
              re.compile(tx, re.M) if tx else None) for name, cls, lg, ex, tx in job.rules]
    with open(job.path, "rb") as fh:
        base = max(0, job.start - 1)
        fh.seek(base)
        buf = fh.read(job.end - base + TAIL_BYTES)
        at_eof = len(buf) < job.end - base + TAIL_BYTES
        if job.start == 0:
            s = 0
        else:
            nl = buf.find(b"\n")
            s = len(buf) if nl < 0 or nl + 1 > job.end - base else nl + 1
        e = job.end - base
        lines = 1 + buf.count(b"\n", s, e - 1) if s < e else 0
        groups: dict[tuple[str, str, str, str], list[Any]] = {}
        errors = fatals = 0
        seconds: dict[bytes, int] = {}
        line, counted = 0, s
        pos = s
        while True:
            m = _HIT.search(buf, pos, e + _HEAD_LEN + 8)
            if m is None:
                break
            pos = m.end()
            ls = buf.rfind(b"\n", 0, m.start()) + 1
            if ls < s or ls >= e or m.start() != ls + _HEAD_LEN - 1:
                continue
            h = _HEAD.match(buf, ls)
            if h is None:
                continue
            # The event runs to the next line that starts with a timestamp; past the buffer, read on.
            while True:
                n = _NEXT.search(buf, m.end())
                if n is not None or at_eof:
                    break
                more = fh.read(TAIL_BYTES)
                at_eof = len(more) < TAIL_BYTES
                buf += more
            stop = n.start() if n is not None else len(buf)
            line += buf.count(b"\n", counted, ls)
            counted = ls
            level = h.group(8).decode()
            errors += level == "ERROR"
            fatals += level == "FATAL"
            key_s = bytes(buf[ls + 1:ls + 20])
            t = seconds.get(key_s)
            if t is None:
                y, mo, d, hh, mi, ss = (int(h.group(i)) for i in range(1, 7))
                t = seconds[key_s] = calendar.timegm((y, mo, d, hh, mi, ss)) * 1000
            t_ms = t + int(h.group(7))
            ev = _event(buf[h.end():stop].decode("utf-8", errors="replace"))
            rule = _match(rules, ev)
            if rule is None:
                status, rname, spec = "unexplained", "", None
            else:
                spec = _explaining(job.explain[rule], t_ms)
                rname = rules[rule][0]
                status = "expected" if spec is not None else "internal" if rules[rule][1] == "internal" \
                    else "unexplained"
            key = (status, rname, ev[0], ev[1])
            g = groups.get(key)
            if g is None:
                time_text = buf[ls + 1:ls + _HEAD_LEN - 1].decode()
                first = _First(t_ms, line, time_text, level, ev[2][:MAX_MESSAGE], ev[3])
                g = groups[key] = [0, 0, first, t_ms, set()]
            g[0] += 1
            g[1] += level == "FATAL"
            g[3] = max(g[3], t_ms)
            if spec is not None:
                g[4].add(spec)
            pos = max(pos, stop)
    return _Stretch(job.node, job.file, job.stretch, lines, groups, errors, fatals)


def _event(body: str) -> tuple[str, str, str, str | None, str, str]:
    """(logger, exception, message, cause line, exception classes, text) of an event's text after its level."""
    rows = body.split("\n")
    logger, k = "", 0
    for i, row in enumerate(rows):
        m = _LOGGER.search(row)
        if m is not None:
            logger, k = m.group(1), i
            rows[i] = row[:m.start()]
            break
    message = "\n".join(r.rstrip("\r") for r in rows[:k + 1]).strip()
    classes: list[str] = []
    lines: list[str] = []
    for row in rows[k + 1:]:
        row = row.rstrip("\r")
        if not row or row[0] in " \t":
            continue
        m = _EXC_LINE.match(row)
        if m is not None and (not classes or row.startswith("Caused by: ")):
            classes.append(m.group(1))
            lines.append(row)
    cause = lines[0][:MAX_MESSAGE] if lines else None
    if not classes:
        m = _NAMED.search(message)
        if m is not None:
            classes.append(m.group(1) or m.group(2))
    return (logger, classes[0] if classes else "", message, cause, " ".join(classes),
            "\n".join([message, *lines]))


def _match(rules: Sequence[tuple[str, str, Any, Any, Any]],
           ev: tuple[str, str, str, str | None, str, str]) -> int | None:
    for i, (_, _, lg, ex, tx) in enumerate(rules):
        if (lg is None or lg.search(ev[0])) and (ex is None or ex.search(ev[4])) and (tx is None or tx.search(ev[5])):
            return i
    return None


def _explaining(windows: Sequence[tuple[float, float, str]], t_ms: int) -> str | None:
    for a, b, spec in windows:
        if a <= t_ms <= b:
            return spec
    return None


# --- the run's faults ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Window:
    nemesis: str
    start_ms: float
    end_ms: float


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _windows(run: Path, facts: HistoryScan | None) -> tuple[list[_Window], float | None]:
    """The run's applied faults as wall-clock windows, and the wall clock (unix ms) of the history's time 0. When
    the run has no clock (test.json without it) or moved a node's clock, that is None and every window spans the
    whole run: a fault then explains an error whenever it was logged. `facts`: the history's scan (None: scan the
    run's history.jsonl here; a run without a readable one has no windows)."""
    if facts is None:
        from kchaos.checkers.history_scan import scan  # here: it loads pyarrow, which the verdict's readers need not
        from kchaos.checkers.parquet import CheckInputError

        try:
            facts = scan(run / "history.jsonl")
        except CheckInputError:
            return [], None
    ops, first_client, last = facts.nemesis, facts.first_client_ns, facts.last_ns
    catalogue = read_faults(run, ops)
    try:
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        test = {}
    start = test.get(HISTORY_START_KEY) if isinstance(test, dict) else None
    spans: list[tuple[str, float, float]] = []  # (spec, from ns, to ns) with infinities
    pending: dict[tuple[str, str], list[float]] = {}
    open_: dict[str, list[float]] = {}
    for op in ops:
        spec, f, t = op.get("nemesis"), op.get("f"), _int(op.get("time"))
        if not isinstance(spec, str) or not isinstance(f, str) or t is None:
            continue
        kind = catalogue.get(spec)
        role = kind.role(f) if kind is not None else None
        closer = f == "heal" or role == "mend"
        if op.get("type") == "invoke":
            if not closer:
                pending.setdefault((spec, f), []).append(t)
            continue
        if closer:
            for a in open_.pop(spec, []):
                spans.append((spec, a, t))
            continue
        began = pending.get((spec, f))
        a = began.pop(0) if began else t
        if op.get("type") != "ok":
            continue  # skipped or failed: nothing broke
        if role == "break" and kind is not None and kind.mends is not None:
            open_.setdefault(spec, []).append(a)
        else:
            spans.append((spec, a, t))
    for spec, starts in open_.items():
        spans += [(spec, a, math.inf) for a in starts]
    if first_client is not None:
        spans.append((START_UP, -math.inf, first_client))
    if last is not None:
        spans.append((SHUTDOWN, last, math.inf))
    origin = float(start) if isinstance(start, (int, float)) and not isinstance(start, bool) and not any(
        fnmatch.fnmatchcase(spec.partition(":")[0], "clock-*") for spec, _, _ in spans) else None
    out = []
    for spec, a, b in spans:
        if origin is not None:
            out.append(_Window(spec, origin + a / 1e6 - WINDOW_BEFORE_MS, origin + b / 1e6 + WINDOW_AFTER_MS))
        elif spec not in (START_UP, SHUTDOWN):
            out.append(_Window(spec, -math.inf, math.inf))
    return out, origin


def _explain_table(windows: Sequence[_Window]) -> tuple[tuple[tuple[float, float, str], ...], ...]:
    """For each rule, the windows of the faults of its families, the latest start first: an event is credited to the
    most recent fault open at its time."""
    fams = {f.name: f.nemeses for f in FAMILIES}
    out = []
    for rule in RULES:
        globs = [g for name in rule.families for g in fams[name]]
        out.append(tuple(sorted(((w.start_ms, w.end_ms, w.nemesis) for w in windows
                                 if any(fnmatch.fnmatchcase(w.nemesis.partition(":")[0], g) for g in globs)),
                                reverse=True)))
    return tuple(out)


# --- the driver ---------------------------------------------------------------------------------------------------

def _log_files(run: Path) -> list[tuple[str, str, Path]]:
    nodes = run / "nodes"
    if not nodes.is_dir():
        return []
    return [(d.name, f"nodes/{d.name}/{name}", d / name) for d in sorted(nodes.iterdir()) if d.is_dir()
            for name in LOG_FILES if (d / name).is_file()]


def kafka_errors(run_dir: Path, spark_master: str = "local[*]", *, history: HistoryScan | None = None,
                 stretch_bytes: int = STRETCH_BYTES, local_bytes: int = LOCAL_BYTES) -> dict[str, Any] | None:
    """Every ERROR and FATAL line of the run's node logs, grouped and classified (the module docstring has the
    shape). None when the run directory has no node logs. `history`: the scan of the run's history, when the
    caller has one (a `HistoryScan`; else it is scanned here), for the faults' windows, whose roles come from the
    run's faults.json (`read_faults`, whose FaultsError propagates). Logs of
    `local_bytes` or more in all are read by Spark tasks of at most `stretch_bytes` each; smaller ones in this
    process."""
    run = Path(run_dir)
    files = _log_files(run)
    if not files:
        return None
    windows, origin = _windows(run, history)
    explain = _explain_table(windows)
    rules = tuple((r.name, r.cls, r.logger, r.exception, r.text) for r in RULES)
    sizes = [p.stat().st_size for _, _, p in files]
    total = sum(sizes)
    jobs: list[_Job] = []
    for (node, rel, path), size in zip(files, sizes):
        parts = max(1, -(-size // max(1, stretch_bytes)))
        cuts = [size * k // parts for k in range(parts + 1)]
        jobs += [_Job(str(path), node, rel, k, a, b, rules, explain) for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    if total < local_bytes:
        got = [_task(j) for j in jobs]
    else:
        got = _on_spark(spark_master, jobs)
    return _summary(got, len(files), total, origin)


def _on_spark(master: str, jobs: list[_Job]) -> list[_Stretch]:
    from pyspark import cloudpickle

    from kchaos.checkers.spark import spark_context

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    sc = spark_context(master)
    sc.setJobDescription("kchaos: Kafka's own logs")
    try:
        return sc.parallelize(jobs, len(jobs)).map(_task).collect()
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]  # pyspark types it str; None (Java's null) clears it


def _summary(got: list[_Stretch], files: int, size: int, origin: float | None) -> dict[str, Any]:
    offset: dict[tuple[str, int], int] = {}
    before: dict[str, int] = {}
    for s in sorted(got, key=lambda s: (s.file, s.stretch)):
        offset[(s.file, s.stretch)] = before.get(s.file, 0)
        before[s.file] = before.get(s.file, 0) + s.lines
    merged: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for s in got:
        for key, (count, fatal, first, last_ms, specs) in s.groups.items():
            line = offset[(s.file, s.stretch)] + first.line + 1
            here = (first.time_ms, s.node, s.file, line)
            g = merged.setdefault(key, {"count": 0, "fatal": 0, "nodes": set(), "specs": set(), "last_ms": last_ms,
                                        "at": None, "first": None})
            g["count"] += count
            g["fatal"] += fatal
            g["nodes"].add(s.node)
            g["specs"] |= specs
            g["last_ms"] = max(g["last_ms"], last_ms)
            if g["at"] is None or here < g["at"]:
                g["at"] = here
                g["first"] = {"node": s.node, "file": s.file, "line": line, "time": first.time,
                              "t_s": None, "level": first.level, "message": first.message, "cause": first.cause}
    rules = {r.name: r for r in RULES}
    groups = []
    for (status, rule, logger, exception), g in merged.items():
        first = g["first"]
        if origin is not None:
            first["t_s"] = round((g["at"][0] - origin) / 1000, 3)
        groups.append({"status": status, "rule": rule or None, "why": _why(status, rules.get(rule)),
                       "logger": logger, "exception": exception or None, "title": _title(first["message"]),
                       "count": g["count"], "fatal": g["fatal"], "nodes": sorted(g["nodes"]),
                       "explained_by": sorted(g["specs"]), "last_time": _stamp(g["last_ms"]), "first": first,
                       "_at": g["at"]})
    groups.sort(key=lambda g: (STATUSES.index(g["status"]), g["_at"]))
    for g in groups:
        del g["_at"]
    return {"files": files, "bytes": size, "lines": sum(s.lines for s in got),
            "errors": sum(s.errors for s in got), "fatals": sum(s.fatals for s in got),
            "windows": origin is not None,
            "statuses": {st: sum(g["count"] for g in groups if g["status"] == st) for st in STATUSES},
            "kinds": {st: sum(1 for g in groups if g["status"] == st) for st in STATUSES},
            "total_groups": len(groups), "listed": min(len(groups), MAX_GROUPS), "groups": groups[:MAX_GROUPS]}


def _why(status: str, rule: Rule | None) -> str:
    if rule is None:
        return "No rule names it."
    fams = ", ".join(rule.families)
    if status == "expected":
        return f"{rule.why} A fault of {fams} was open then."
    if status == "internal":
        return rule.why + (f" No fault of {fams} was open then." if fams else "")
    return f"{rule.why} Expected under {fams}, but no such fault was open then."


def _stamp(ms: int) -> str:
    t = ms // 1000
    return f"{_utc(t)},{ms % 1000:03d}"


def _utc(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


_CONTEXT = re.compile(r"^(?:\[[^\]]*\]\s*)+")


def _title(message: str) -> str:
    """The message without its `[Component id=N]` prefixes, up to its first `: `, cut to MAX_TITLE."""
    text = _CONTEXT.sub("", message.split("\n", 1)[0]).strip() or message.split("\n", 1)[0]
    cut = text.find(": ")
    if cut >= 10:
        text = text[:cut]
    return text if len(text) <= MAX_TITLE else text[:MAX_TITLE - 1] + "…"


def _short(exception: str | None) -> str:
    return exception.rsplit(".", 1)[-1] if exception else ""


def _where(g: Mapping[str, Any]) -> str:
    f = g["first"]
    exc = _short(g.get("exception"))
    return f"{f['node']} {f['time'][11:19]} {g['title']}" + (f" ({exc})" if exc else "")


def errors_line(summary: Mapping[str, Any]) -> str:
    """One line, no newline, about the run's ERROR and FATAL lines: how many kinds, by status, and the first group
    of the most severe status present (internal, then unexplained, then expected)."""
    n = summary["total_groups"]
    if not n:
        return "Kafka logged no ERROR or FATAL line"
    kinds = summary["kinds"]
    by = ", ".join(f"{kinds[st]} {st}" for st in STATUSES if kinds[st])
    lines = summary["errors"] + summary["fatals"]
    first = summary["groups"][0]
    return (f"Kafka logged {n} kind{'s' * (n != 1)} of error ({by}; {lines:,} line{'s' * (lines != 1)}), "
            f"first {first['status']}: {_where(first)}")


def internal_reasons(summary: Mapping[str, Any] | None) -> list[str]:
    """The verdict's reasons for the internal groups, one each, first occurrence first; at most MAX_REASONS, and a
    last line counting the others. Empty when there is none (unexplained and expected groups give none)."""
    if not summary:
        return []
    internal = [g for g in summary["groups"] if g["status"] == "internal"]
    out = [f"Kafka reported an internal fault: {_where(g)}, "
           f"{'once' if g['count'] == 1 else str(g['count']) + ' times'}" for g in internal[:MAX_REASONS]]
    rest = summary["kinds"]["internal"] - len(out)
    if rest > 0:
        out.append(f"Kafka reported {rest} more kind{'s' * (rest != 1)} of internal fault (results.json kafka_errors)")
    return out
