"""`kchaos run`'s options: the argparse definitions and the TestConfig they build.

The command line adds them to its `run` subcommand; suite and scenario files
(`kchaos.harness.suites.spec_files`) parse their run options with the same definitions.
"""
from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kchaos.core.config import (
    CLIENTS,
    JAVA_CLIENTS_DEFAULT,
    ClusterConfig,
    ConfigError,
    NemesisConfig,
    ProducerConfig,
    TestConfig,
    TopicConfig,
    WorkloadConfig,
    exact_kafka_version,
    java_clients_version,
    uses_disk_full,
)
from kchaos.core.workload_kind import KINDS, WorkloadKind, all_kinds, known
from kchaos.harness import full_load
from kchaos.nemesis.mix import FAMILIES
from kchaos.workloads.java_build import jdk_problem

D = TestConfig()  # every option's default


def _csv(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in s.split(",") if x.strip())


def _names(what: str) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated list that must name at least one `what` (an empty one is a mistake, not the default)."""
    def parse(s: str) -> tuple[str, ...]:
        if not (names := _csv(s)):
            raise argparse.ArgumentTypeError(f"names no {what}")
        return names
    return parse


def spark_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--spark-master and --spark-driver-host: where a subcommand that checks runs its Spark job."""
    p.add_argument("--spark-master", default=D.spark_master,
                   help="where the checker runs: local[N] (default local[*]) or an existing cluster, "
                        "spark://HOST:7077 (see docs/checkers.md)")
    p.add_argument("--spark-driver-host", default=None, metavar="ADDR",
                   help="local address the Spark driver binds and advertises, for a remote --spark-master "
                        "whose executors must connect back (default: 127.0.0.1)")


GROUPS = {
    "cluster": "the Kafka cluster: its shape, where it runs, its storage",
    "topic": "the test topic and its durability settings",
    "producer": "the producers: what an acknowledgement promises, and the load",
    "consumer": "the consumers that read while the faults happen",
    "workload options": "each workload's own (--workload NAME: ...); another workload's is an error",
    "faults": "what breaks, when and for how long; the seed draws the schedule",
    "checking": "where the Spark checker runs",
    "output": "where the run goes and what is printed",
}


# The run options `kchaos run --help` shows: what most runs set. `--help-all` shows every one.
COMMON = frozenset({"--kafka-version", "--nodes", "--hosts", "--partitions", "--min-insync", "--unclean", "--acks",
                    "--rate", "--producers", "--workload", "--consumers", "--nemesis", "--interval", "--time-limit",
                    "--seed", "--name", "--store", "--quiet", "--dry-run"})


def add_run_options(r: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """Every `kchaos run` option, in the groups of GROUPS; return the groups by name. Suite and scenario files
    name the same options (`kchaos.harness.suites.spec_files`)."""
    g = {name: r.add_argument_group(name, about) for name, about in GROUPS.items()}
    c = g["cluster"]
    c.add_argument("--nodes", type=int, default=D.cluster.nodes, help="brokers, n1..nN")
    c.add_argument("--dynamic-quorum", action=argparse.BooleanOptionalAction, default=D.cluster.dynamic_quorum,
                   help="a dynamic KRaft quorum (KIP-853, Kafka 3.9+): controllers found through "
                        "controller.quorum.bootstrap.servers and formatted with --initial-controllers, so that the "
                        "controller nemeses can remove and add them")
    c.add_argument("--spares", type=int, default=D.cluster.spares, metavar="N",
                   help="spare brokers after n1..nN, broker-only and stopped until the add-broker or decommission "
                        "nemesis brings one in (default: 0)")
    c.add_argument("--controllers", type=int, default=D.cluster.controllers,
                   help="dedicated KRaft controllers c1..cK (0, 1, 3 or 5); 0: every node is broker and controller")
    c.add_argument("--kafka-version", default=D.cluster.kafka_version,
                   help="the Kafka release the nodes run: a line (3.7 ... 4.4: its latest patch) or an exact release; "
                        "`kchaos versions` lists them")
    c.add_argument("--kafka-dist", default=None, metavar="PATH",
                   help="an extracted kafka_2.13-3.7.x directory or its .tgz (default: KAFKA_HOME if set, else the "
                        "jars of --kafka-version, fetched with Maven into ~/.cache/kchaos)")
    c.add_argument("--base-image", default=None, metavar="IMAGE",
                   help="an existing image to build the node image on (default: a Debian 12 base made with "
                        "mmdebstrap)")
    c.add_argument("--subnet", default=D.cluster.subnet, help="the Docker network of the nodes")
    c.add_argument("--kafka-feature", action="append", default=[], metavar="NAME=LEVEL",
                   help="format the storage with this feature level (repeatable; Kafka 3.9+), e.g. "
                        "eligible.leader.replicas.version=1 turns Eligible Leader Replicas on in a new 4.0 cluster, "
                        "share.version=1 share groups on in 4.1 (default: the release's own levels)")
    c.add_argument("--hosts", default=None, metavar="FILE",
                   help="run on the machines of this hosts file over SSH (docs/hosts.md); --nodes and "
                        "--controllers then come from the file (default: Docker containers on this machine)")
    c.add_argument("--replica-lag-time-max-ms", type=int, default=D.cluster.replica_lag_time_max_ms, metavar="MS",
                   help="replica.lag.time.max.ms: how long a follower may lag before it leaves the ISR")
    c.add_argument("--broker-session-timeout-ms", type=int, default=D.cluster.broker_session_timeout_ms,
                   metavar="MS", help="broker.session.timeout.ms: how long the controller waits for a broker's "
                                      "heartbeat before fencing it")
    c.add_argument("--storage", default=D.cluster.storage, metavar="{auto,lazyfs,plain}",
                   help="lazyfs (unsynced writes can be lost on power failure), plain, or auto: lazyfs when a "
                        "nemesis needs it")
    c.add_argument("--kafka-jit", default=D.cluster.kafka_jit, metavar="{c1,tiered}",
                   help="how Kafka's JVM compiles: c1 stops at the quick compiler (-XX:TieredStopAtLevel=1), "
                        "which in a run of minutes costs a third less CPU than tiered, the JVM's own default that "
                        "adds C2 for peak speed after a long warm-up; Kafka behaves the same either way")
    c.add_argument("--page-cache", default=D.cluster.page_cache, metavar="{kernel,never-written-back}",
                   help="what a power failure finds on disk. kernel: lazyfs writes unsynced data back as each "
                        "node's Linux does (vm.dirty_expire_centisecs, 30 s by default, checked every "
                        "vm.dirty_writeback_centisecs, 5 s); never-written-back: the worst case, only fsynced "
                        "data survives")
    c.add_argument("--writeback-age", type=float, default=D.cluster.writeback_age_s, metavar="SECONDS",
                   help="set the writeback age by hand instead of the node's vm.dirty_expire_centisecs; "
                        "0 is never-written-back (default: the --page-cache model's)")
    c.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    t = g["topic"]
    t.add_argument("--partitions", type=int, default=D.topic.partitions, help="partitions of the test topic")
    t.add_argument("--rf", type=int, default=D.topic.replication_factor, help="replication factor")
    t.add_argument("--min-insync", type=int, default=D.topic.min_insync, metavar="N", help="min.insync.replicas")
    t.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=D.topic.unclean,
                   help="unclean.leader.election.enable")
    t.add_argument("--flush-messages", type=int, default=D.topic.flush_messages, metavar="N",
                   help="flush.messages: fsync the log every N records; 0 leaves it to Kafka, which never does")
    t.add_argument("--segment-ms", type=int, default=D.topic.segment_ms, metavar="MS",
                   help="segment.ms: roll the topic's log segments this often, so closed segments exist for "
                        "--nemesis corrupt; 0 leaves Kafka's 7 days")
    p = g["producer"]
    p.add_argument("--acks", default=D.producer.acks, metavar="{0,1,all}",
                   help="how many replicas must have a write before it is acknowledged")
    p.add_argument("--idempotence", action=argparse.BooleanOptionalAction, default=None,
                   help="enable.idempotence (needs --acks all); the share workload's producers are idempotent "
                        "with acks=all unless --no-idempotence")
    p.add_argument("--retries", type=int, default=D.producer.retries, metavar="N",
                   help="retries of a failed send within the delivery timeout")
    p.add_argument("--linger-ms", type=int, default=None, metavar="MS",
                   help=f"linger.ms: how long the client waits to fill a batch (default: {D.producer.linger_ms}; "
                        "--rate max picks it)")
    p.add_argument("--max-in-flight", type=int, default=D.producer.max_in_flight, metavar="N",
                   help="max.in.flight.requests.per.connection")
    p.add_argument("--delivery-timeout-ms", type=int, default=D.producer.delivery_timeout_ms, metavar="MS",
                   help="delivery.timeout.ms: when an unacknowledged send is given up (its outcome is unknown)")
    p.add_argument("--request-timeout-ms", type=int, default=D.producer.request_timeout_ms, metavar="MS",
                   help="request.timeout.ms: how long one produce request may take")
    p.add_argument("--socket-timeout-ms", type=int, default=D.producer.socket_timeout_ms, metavar="MS",
                   help="librdkafka's socket.timeout.ms: how long its other requests may take (EndTxn and "
                        "AddPartitionsToTxn to the transaction coordinator among them); a request that times out "
                        "closes its connection and is sent again on a new one. The Java client times every "
                        "request with --request-timeout-ms (default: librdkafka's, 60000; a transactional "
                        "producer's: its transaction timeout, --delivery-timeout-ms + 5000)")
    p.add_argument("--rate", type=full_load.parse_rate, default=D.workload.rate, metavar="{N,max}",
                   help="target sends per second, all producers together; "
                        + full_load.help_text(java=jdk_problem() is None))
    p.add_argument("--producers", type=int, default=None, metavar="N",
                   help=f"producer instances (default: {D.workload.producers}; --rate max picks it)")
    p.add_argument("--in-flight", type=int, default=None, metavar="N",
                   help="sends each producer keeps outstanding, each slot its own logical process "
                        f"(1: one send, wait for its report, the next) (default: {D.workload.in_flight}; "
                        "--rate max picks it)")
    p.add_argument("--producer-processes", type=int, default=None, metavar="K",
                   help="run the producers in K worker processes, each recording its own stream merged "
                        "into history.jsonl after the run (0: threads of the harness) "
                        f"(default: {D.workload.producer_processes}; --rate max picks it)")
    p.add_argument("--workload", default=D.workload.kind, metavar="{" + ",".join(KINDS) + "}",
                   help="queue: one record per send, consumers poll; txn: transactions of up to 4 sends and polls "
                        "(docs/history.md), one at a time per producer, each producer with a consumer of its own; "
                        "copy: --consumers copiers copy a filled input topic to the test topic exactly once "
                        "(consume-transform-produce, docs/running.md); share: --consumers members of a share group "
                        "(KIP-932, Kafka 4.2+, or 4.1 with share.version=1) on the Java client; txn and copy turn "
                        "--idempotence on, share defaults to it")
    p.add_argument("--client", default=None, choices=CLIENTS,
                   help="the client library: of the producers (--workload queue) or of the transactions (txn and "
                        "copy). python: librdkafka (confluent-kafka); java: the Kafka Java client (queue: every "
                        "producer in one JVM, the fastest at --rate max; txn and copy: KIP-890 transactions), "
                        "kafka-clients of "
                        "--kafka-version from 4.0 on, else "
                        f"{JAVA_CLIENTS_DEFAULT}; needs a JDK (java, javac) on PATH (default: python; --rate max "
                        "picks java for --workload queue when there is a JDK)")
    g["consumer"].add_argument("--consumer-mode", default=D.workload.consumer_mode, metavar="{assign,subscribe}",
                               help="assign: each consumer is assigned every partition from offset 0; subscribe: the "
                                    "consumers join one group (kchaos-<seed>-group), rebalance and commit "
                                    "(docs/running.md)")
    g["consumer"].add_argument("--group-protocol", default=None, metavar="{classic,consumer}",
                               help="--consumer-mode subscribe: the rebalance protocol, group.protocol (default "
                                    "classic; consumer is KIP-848's and needs Kafka 4.0 or later)")
    g["consumer"].add_argument("--consumers", type=int, default=D.workload.consumers, metavar="N",
                               help="consumers polling every partition from offset 0 during the run")
    _workload_arguments(g["workload options"])
    f = g["faults"]
    f.add_argument("--nemesis", type=_names("fault (none: no faults)"), default=None, metavar="FAULTS",
                   help="comma-separated faults, each optionally NAME:TARGET (e.g. kill:majority), or none; "
                        "see docs/nemeses.md (default: kill-leader)")
    f.add_argument("--mix-families", type=_names("family"), default=None, metavar="FAMILIES",
                   help=f"with --nemesis mix: comma-separated fault families it draws from: {', '.join(FAMILIES)} "
                        f"(default: {', '.join(D.nemesis.mix_families)})")
    f.add_argument("--schedule", default=None, metavar="FILE",
                   help="replay this schedule.json (from a run directory or written by hand); the nemeses are the "
                        "ones it names (default: draw the faults from the seed)")
    f.add_argument("--upgrade-to", default=None, metavar="VERSION",
                   help="--nemesis upgrade: the Kafka release (or line) every node is rolled to, one at a time")
    f.add_argument("--upgrade-then", default=D.nemesis.upgrade_then, choices=("finalize", "stay", "downgrade"),
                   help="--nemesis upgrade: after the roll, finalize it (kafka-features upgrade: metadata.version "
                        "and the release's features), stay unfinalized, or roll back to --kafka-version "
                        "(default finalize)")
    f.add_argument("--disk-full-headroom", type=int, default=None, metavar="BYTES",
                   help="--nemesis disk-full: how many bytes the node's log directory may still grow by once the "
                        "fault fills its disk (default 4096: filled within a second by the default workload; the "
                        "write that crosses it is cut short)")
    f.add_argument("--reassign-throttle", type=int, default=None, metavar="BYTES",
                   help="--nemesis reassign: throttle each reassignment's copying to BYTES a second between brokers "
                        "(kafka-reassign-partitions --throttle), as operators do; default: none")
    f.add_argument("--interval", type=float, default=D.nemesis.interval, metavar="SECONDS",
                   help="seconds between faults")
    f.add_argument("--jitter", type=float, default=D.nemesis.jitter,
                   help="random spread of --interval, as a fraction of it")
    f.add_argument("--restart-delay", type=float, default=D.nemesis.restart_delay, metavar="SECONDS",
                   help="seconds a killed node stays down, and the shortest any fault lasts")
    f.add_argument("--time-limit", type=float, default=D.time_limit, metavar="SECONDS",
                   help="seconds of workload and faults, before the heal")
    f.add_argument("--seed", type=int, default=None,
                   help="seed of every random choice, the fault schedule included "
                        "(default: random, saved in test.json)")
    spark_options(g["checking"])
    o = g["output"]
    o.add_argument("--name", default=None, help="test name: the run goes in STORE/NAME/<UTC stamp>/ (default: the "
                   "workload's name, queue, txn or copy)")
    o.add_argument("--store", default=D.store, help="results root")
    return g


def config_from_args(a: argparse.Namespace) -> TestConfig:
    """A TestConfig from parsed `run` arguments (not yet validated)."""
    seed = a.seed if a.seed is not None else secrets.randbelow(2**31)
    if a.schedule and a.nemesis:
        raise ConfigError("--schedule names its own nemeses; drop --nemesis")
    if a.mix_families is not None and "mix" not in (a.nemesis or ()):
        raise ConfigError("--mix-families only applies to --nemesis mix")
    if a.disk_full_headroom is not None and not a.schedule and not uses_disk_full(
            NemesisConfig(names=tuple(a.nemesis or D.nemesis.names),
                          mix_families=D.nemesis.mix_families if a.mix_families is None else a.mix_families)):
        raise ConfigError("--disk-full-headroom only applies to --nemesis disk-full (or a mix with its disk family)")
    if a.reassign_throttle is not None and not a.schedule and not _may_reassign(a):
        raise ConfigError("--reassign-throttle only applies to --nemesis reassign "
                          "(or a mix with its membership family)")
    for flag, given in (("--group-commit", a.group_commit), ("--group-protocol", a.group_protocol)):
        if given is not None and a.consumer_mode != "subscribe":
            raise ConfigError(f"{flag} only applies to --consumer-mode subscribe")
    load = _load(a)
    return TestConfig(
        name=a.name or a.workload, seed=seed, time_limit=a.time_limit, store=a.store, spark_master=a.spark_master,
        topic=TopicConfig(partitions=a.partitions, replication_factor=a.rf, min_insync=a.min_insync,
                          unclean=a.unclean, flush_messages=a.flush_messages,
                          segment_ms=a.segment_ms),
        producer=ProducerConfig(acks=str(a.acks), idempotence=_idempotence(a),
                                retries=a.retries,
                                linger_ms=load["linger_ms"], max_in_flight=a.max_in_flight,
                                delivery_timeout_ms=a.delivery_timeout_ms, request_timeout_ms=a.request_timeout_ms,
                                socket_timeout_ms=a.socket_timeout_ms),
        cluster=ClusterConfig(nodes=a.nodes, controllers=a.controllers, spares=a.spares,
                              dynamic_quorum=a.dynamic_quorum,
                              kafka_version=exact_kafka_version(a.kafka_version),
                              kafka_dist=a.kafka_dist, base_image=a.base_image, subnet=a.subnet,
                              replica_lag_time_max_ms=a.replica_lag_time_max_ms,
                              broker_session_timeout_ms=a.broker_session_timeout_ms, storage=a.storage,
                              kafka_jit=a.kafka_jit,
                              page_cache=a.page_cache, writeback_age_s=a.writeback_age, hosts=a.hosts,
                              kafka_features=tuple(a.kafka_feature)),
        workload=WorkloadConfig(kind=a.workload, producers=load["producers"], consumers=a.consumers, rate=a.rate,
                                client=load["client"], options=_workload_options(a),
                                client_version=_clients_version(a) if load["client"] == "java" else None,
                                in_flight=load["in_flight"], producer_processes=load["producer_processes"],
                                full_load=load.get("full_load"), consumer_mode=a.consumer_mode,
                                group_protocol=a.group_protocol or D.workload.group_protocol),
        nemesis=NemesisConfig(names=a.nemesis or D.nemesis.names, interval=a.interval, jitter=a.jitter,
                              restart_delay=a.restart_delay, schedule_file=a.schedule,
                              mix_families=D.nemesis.mix_families if a.mix_families is None else a.mix_families,
                              upgrade_to=a.upgrade_to and exact_kafka_version(a.upgrade_to),
                              upgrade_then=a.upgrade_then,
                              disk_full_headroom=D.nemesis.disk_full_headroom if a.disk_full_headroom is None
                              else a.disk_full_headroom,
                              reassign_throttle=a.reassign_throttle or 0),
    )


def _clients_version(a: argparse.Namespace) -> str:
    """The kafka-clients release of the Java client: `java_clients_version`, at least what the workload's Java clients
    need (an unknown workload is refused later)."""
    kind = known(a.workload)
    return java_clients_version(exact_kafka_version(a.kafka_version), kind.java_clients_since if kind else None)


def _may_reassign(a: argparse.Namespace) -> bool:
    names = tuple(a.nemesis or D.nemesis.names)
    families = D.nemesis.mix_families if a.mix_families is None else a.mix_families
    return any(n.partition(":")[0] == "reassign" for n in names) or ("mix" in names and "membership" in families)


def _load(a: argparse.Namespace) -> dict:
    """--producers, --producer-processes, --in-flight and --linger-ms: as given, else the defaults, else (with
    --rate max) picked for this machine (`full_load.pick`), with the record of the pick as "full_load"."""
    given = {k: getattr(a, k) for k in full_load.PICKED}
    if a.rate == full_load.MAX:
        java = a.workload == "queue" and jdk_problem() is None
        record = full_load.pick(full_load.usable_cores(), given, java=java)
        return {**record["picked"], "full_load": record}
    kind = known(a.workload)  # one that runs on one client only defaults to it; an unknown one is refused later
    clients = kind.clients if kind is not None else (D.workload.client,)
    defaults = {"client": D.workload.client if D.workload.client in clients else clients[0],
                "producers": D.workload.producers,
                "producer_processes": D.workload.producer_processes, "in_flight": D.workload.in_flight,
                "linger_ms": D.producer.linger_ms}
    return {k: defaults[k] if v is None else v for k, v in given.items()}


def _workload_arguments(group: argparse._ArgumentGroup) -> None:
    """One option per flag that a registered workload's options name (`flag`, `help`, `metavar` in each field's
    metadata; a flag several workloads take says what it means to each). Unset (None) unless given: a workload
    takes its own defaults."""
    owners: dict[str, list[tuple[str, Any]]] = {}
    for kind in all_kinds():
        for f in fields(kind.options):
            owners.setdefault(f.metadata["flag"], []).append((kind.name, f))
    for flag, them in owners.items():
        first = them[0][1]
        default = " or ".join(dict.fromkeys(str(f.default).lower() if isinstance(f.default, bool) else str(f.default)
                                            for _, f in them))
        text = "; ".join(f"--workload {name}: {f.metadata['help']}" for name, f in them) + f" (default {default})"
        if isinstance(first.default, bool):
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            group.add_argument(flag, type=type(first.default), default=None, metavar=first.metadata.get("metavar"),
                               help=text)


def _flags(kind: WorkloadKind) -> dict[str, str]:
    """The `kchaos run` flags of a workload's options, each with the field it sets."""
    return {f.metadata["flag"]: f.name for f in fields(kind.options)}


def _workload_options(a: argparse.Namespace) -> Any:
    """The workload's own options from the flags its options' fields name (`flag` in their metadata), its defaults
    where not given; ConfigError for a flag given that only other workloads take. None for a workload the registry
    does not know: it is refused later, by name."""
    kind = known(a.workload)
    if kind is None:
        return None
    mine = _flags(kind)
    for flag in dict.fromkeys(flag for k in all_kinds() for flag in _flags(k)):
        if flag not in mine and getattr(a, _dest(flag), None) is not None:
            takers = [k.name for k in all_kinds() if flag in _flags(k)]
            raise ConfigError(f"{flag} applies to --workload {' or '.join(takers)} only")
    return kind.options(**{name: given for flag, name in mine.items()
                           if (given := getattr(a, _dest(flag), None)) is not None})


def for_its_workload(a: argparse.Namespace) -> argparse.Namespace:
    """`a` without the workload options its workload does not take (flags of other workloads' options, left
    unset): a suite's base and matrix give each cell the options its workload takes."""
    kind = known(a.workload)
    if kind is None:
        return a
    others = {flag for k in all_kinds() for flag in _flags(k)} - set(_flags(kind))
    return argparse.Namespace(**{**vars(a), **{_dest(flag): None for flag in others if hasattr(a, _dest(flag))}})


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _idempotence(a: argparse.Namespace) -> bool:
    """Whether the run's producers are idempotent: always for a transactional workload; else as --idempotence
    says; else the workload's default with acks=all (the registry's `idempotent`). A workload the registry does
    not know is refused later, by name."""
    kind = known(a.workload)
    if kind is not None and kind.transactional:
        return True
    if a.idempotence is not None:
        return bool(a.idempotence)
    return kind is not None and kind.idempotent and str(a.acks) == "all"
