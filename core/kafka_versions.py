"""The Kafka releases kchaos can run, one entry per minor line, and what kchaos does differently on each.

`--kafka-version` (through `core.config.validate`) and `kchaos versions` both read `LINES`. A line name
(`4.2`) stands for its latest patch release; an exact patch release of a listed line (`4.1.0`) is
taken as given. What differs per line is stated here once, checked against each line's jars from
Maven Central (docs/versions.md):

- `log4j2`: from 4.1 `kafka_2.13` carries log4j-core, which Kafka 4 drives directly; without a log4j2
  configuration it prints "No configuration found" errors. The brokers' own logging stays on the
  reload4j binding (slf4j 1.7 in every line), so server.log reads alike on every line.
- `dump_class`: DumpLogSegments moved from `kafka.tools` (Scala) to `org.apache.kafka.tools` in 4.3.
- `perf_bootstrap`: ProducerPerformance takes `--bootstrap-server` from 4.2; before, only
  `--producer-props bootstrap.servers=...`.
- The storage tool is `kafka.tools.StorageTool format ... --ignore-formatted` in every line (static
  `controller.quorum.voters`, so no `--standalone` or `--initial-controllers`).
- Every line's class files are Java 17 or older (major 61 at most): the nodes' OpenJDK 17 runs them all.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

STORAGE_TOOL = "kafka.tools.StorageTool"
PERF_CLASS = "org.apache.kafka.tools.ProducerPerformance"
OLD_DUMP_CLASS = "kafka.tools.DumpLogSegments"
NEW_DUMP_CLASS = "org.apache.kafka.tools.DumpLogSegments"


class UnsupportedVersion(ValueError):
    """A Kafka version kchaos cannot run; the message is one line naming the versions it can."""


@dataclass(frozen=True)
class KafkaLine:
    """One minor release line: its patch releases on Maven Central (the last is the latest) and the
    facts kchaos's node configuration and tool invocations follow for it."""

    line: str
    patches: tuple[str, ...]
    log4j2: bool = False
    dump_class: str = OLD_DUMP_CLASS
    perf_bootstrap: bool = False
    java: int = 17
    tools_version: str | None = None  # kafka-tools from another release, when this line publishes none
    durability: str = ""
    share_groups: bool = False  # share groups (KIP-932) production-ready: brokers and kafka-clients from 4.2
    share_preview: bool = False  # share groups in preview (4.1): on once the cluster finalizes share.version=1
    # A share group's own share.delivery.count.limit (a group config, KAFKA-20159): from 4.3; before, only the
    # brokers' group.share.delivery.count.limit (5 by default) sets it.
    share_group_delivery_limit: bool = False

    @property
    def latest(self) -> str:
        """The line's newest patch release."""
        return self.patches[-1]

    @property
    def major(self) -> int:
        """The major release (3 or 4)."""
        return int(self.line.split(".")[0])


LINES: tuple[KafkaLine, ...] = (
    KafkaLine("3.7", ("3.7.0", "3.7.1", "3.7.2"),
              durability="KRaft ignores unclean.leader.election.enable (KAFKA-12670); no ELR"),
    KafkaLine("3.8", ("3.8.0", "3.8.1"),
              durability="KRaft still ignores unclean.leader.election.enable; no ELR"),
    KafkaLine("3.9", ("3.9.0", "3.9.1", "3.9.2"),
              durability="KRaft honours unclean.leader.election.enable (KAFKA-12670); no ELR"),
    KafkaLine("4.0", ("4.0.0", "4.0.1", "4.0.2"),
              durability="no ZooKeeper; ELR off unless eligible.leader.replicas.version=1; KIP-890 and KIP-848 GA"),
    KafkaLine("4.1", ("4.1.0", "4.1.1", "4.1.2"), log4j2=True, share_preview=True,
              durability="ELR on by default for new clusters"),
    KafkaLine("4.2", ("4.2.0", "4.2.1", "4.2.2"), log4j2=True, perf_bootstrap=True,
              share_groups=True,
              durability="ELR on by default"),
    KafkaLine("4.3", ("4.3.0", "4.3.1"), log4j2=True, perf_bootstrap=True, dump_class=NEW_DUMP_CLASS,
              share_groups=True, share_group_delivery_limit=True,
              durability="ELR on by default"),
    KafkaLine("4.4", ("4.4.0",), log4j2=True, perf_bootstrap=True, dump_class=NEW_DUMP_CLASS,
              share_groups=True, share_group_delivery_limit=True,
              durability="ELR on by default"),
)
DEFAULT = "3.7.2"
LINE_NAMES = tuple(x.line for x in LINES)  # oldest first
ON_LINE = "-kafka-"  # a scenario variant run on another line than its own is NAME-kafka-LINE


def _supported() -> str:
    return ", ".join(f"{x.line} ({x.latest})" for x in LINES)


def resolve_version(text: str) -> str:
    """The exact release `text` names: a line (`4.2`) gives its latest patch, a patch release of a listed
    line (`4.1.0`) itself. UnsupportedVersion for anything else."""
    for x in LINES:
        if text == x.line:
            return x.latest
        if text in x.patches:
            return text
    if re.fullmatch(r"\d+\.\d+(\.\d+)?", text):
        raise UnsupportedVersion(f"--kafka-version {text}: kchaos cannot run it; it runs {_supported()}")
    raise UnsupportedVersion(f"--kafka-version {text!r} is not like 3.7.2 or 4.2; kchaos runs {_supported()}")


def line_of(version: str) -> KafkaLine:
    """The line of an exact release `version` (3.7.2 -> 3.7); for a release newer than every listed patch
    of a listed line (a user's --kafka-dist), still that line. UnsupportedVersion when no line matches."""
    m = re.fullmatch(r"(\d+\.\d+)(\.\d+)?", version)
    for x in LINES:
        if m and m.group(1) == x.line:
            return x
    raise UnsupportedVersion(f"Kafka {version}: kchaos cannot run it; it runs {_supported()}")


def release_key(version: str) -> tuple[int, ...]:
    """A release as numbers, for ordering (3.9.2 < 4.0.0)."""
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def finalize_commands(version: str, bootstrap: str) -> list[list[str]]:
    """The FeatureCommand runs that finalize an upgrade to Kafka `version` (class and arguments, run with that
    release's jars), in order. First `--metadata LINE`: metadata.version only, the one option 3.7 to 3.9 have.
    From 4.0 then `--release-version LINE`, for the release's other features (ELR, transaction.version,
    group.version): brokers registered under the old metadata.version advertise no other feature, so asking for
    them all at once fails ("Broker 2 does not support this feature", seen rolling 3.7.2 to 4.4.0); the
    caller retries it while the brokers register again."""
    x = line_of(version)
    tool = ["org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap, "upgrade"]
    return [tool + ["--metadata", x.line]] + ([tool + ["--release-version", x.line]] if x.major >= 4 else [])


_FEATURE_ANSWER = re.compile(r"^\S+ (?:was|can be) (?:upgraded|downgraded|disabled) to \d+\.?$")


def feature_answer(output: str) -> str:
    """FeatureCommand's answer in `output` (the tool's stdout and stderr): its "<feature> was upgraded to N."
    lines, joined by "; ", in order. The AdminClient's own log lines (a WARN that a restarting broker refused a
    connection) are left out, whatever came last. Output with no such line gives its last line, so nothing
    the tool said is dropped unseen."""
    lines = [x.strip() for x in output.strip().splitlines() if x.strip()]
    return "; ".join(x for x in lines if _FEATURE_ANSWER.match(x)) or (lines[-1] if lines else "")


def release_timeline(ops: Iterable[dict[str, Any]], first: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Which release each node ran when, from a history's ops: node -> its releases in order, each
    `{"release", "from_s"}` (history seconds), and for a change by an `upgrade` op `down_s`, when that op
    stopped the node. `first` is each node's release at the start."""
    out = {n: [{"release": v, "from_s": 0.0}] for n, v in sorted(first.items())}
    started: dict[Any, float] = {}
    for o in ops:
        if o.get("process") != "nemesis" or o.get("f") != "upgrade":
            continue
        if o.get("type") == "invoke":
            started[o.get("index")] = o["time"] / 1e9
        elif o.get("type") == "ok" and o.get("node") in out:
            down = max((t for t in started.values() if t <= o["time"] / 1e9), default=None)
            out[o["node"]].append({"release": o["to"], "from_s": round(o["time"] / 1e9, 3),
                                   **({"down_s": round(down, 3)} if down is not None else {})})
            started.clear()
    return out


def on_line_name(variant: str, line: str) -> str:
    """The name of scenario variant `variant` run on Kafka `line` other than its own: NAME-kafka-LINE."""
    return f"{variant}{ON_LINE}{line}"


def split_on_line(name: str) -> tuple[str, str | None]:
    """(variant, line) of a NAME-kafka-LINE name; (name, None) for any other name."""
    base, sep, line = name.rpartition(ON_LINE)
    return (base, line) if sep and base and line in LINE_NAMES else (name, None)


def dump_class(version: str) -> str:
    """The DumpLogSegments class of Kafka `version`; the 3.7 class when the line is unknown."""
    try:
        return line_of(version).dump_class
    except UnsupportedVersion:
        return OLD_DUMP_CLASS


def node_env(version: str) -> dict[str, str]:
    """What the node scripts (kafka-ctl) need to know about the line: the storage tool, and whether the JVM
    also gets the log4j2 configuration."""
    x = line_of(version)
    return {"KCHAOS_STORAGE_TOOL": STORAGE_TOOL, "KCHAOS_LOG4J2": "1" if x.log4j2 else "0"}


def scripts_env(version: str) -> dict[str, str]:
    """`node_env` for Kafka `version`'s line; for a user's distribution of a line kchaos does not list, nothing
    (the scripts' defaults: the 3.7 line's)."""
    try:
        return node_env(version)
    except UnsupportedVersion:
        return {}


def perf_command(version: str, topic: str, records: int, bootstrap: str, acks: str) -> list[str]:
    """ProducerPerformance's command line (class and arguments) for `records` 8-byte records on Kafka `version`."""
    args = [PERF_CLASS, "--topic", topic, "--num-records", str(records), "--record-size", "8", "--throughput", "-1"]
    if line_of(version).perf_bootstrap:
        return args + ["--bootstrap-server", bootstrap, "--producer-props", f"acks={acks}"]
    return args + ["--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}"]


def tools_record(version: str) -> dict[str, str]:
    """For test.json: which release's tools ran beside Kafka `version`, and the classes kchaos calls."""
    x = line_of(version)
    return {"line": x.line, "tools_version": x.tools_version or version, "dump_class": x.dump_class,
            "storage_tool": STORAGE_TOOL, "java": str(x.java),
            "logging": "reload4j + log4j2" if x.log4j2 else "reload4j"}


__all__ = ["KafkaLine", "LINES", "DEFAULT", "UnsupportedVersion", "resolve_version", "line_of", "dump_class",
           "node_env", "scripts_env", "perf_command", "tools_record", "on_line_name", "split_on_line", "release_key",
           "finalize_commands", "release_timeline",
           "LINE_NAMES"]
