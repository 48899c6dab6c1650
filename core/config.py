"""Test configuration: frozen dataclasses, validated before anything is created.

A `TestConfig` is everything needed to run a test again; it is written verbatim
to `test.json` in the run directory and read back by `TestConfig.from_dict`.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kchaos.core.kafka_versions import DEFAULT as KAFKA_DEFAULT
from kchaos.core.kafka_versions import UnsupportedVersion, line_of, release_key, resolve_version
from kchaos.core.page_cache import MODELS as PAGE_CACHE_MODELS
from kchaos.core.page_cache import NEVER as NEVER_WRITTEN_BACK
from kchaos.core.workload_kind import UnknownWorkload, WorkloadKind, all_kinds, kind_of, known

ACKS = ("0", "1", "all")
STORAGES = ("auto", "lazyfs", "plain")
KAFKA_JITS = ("c1", "tiered")
ISOLATIONS = ("read_committed", "read_uncommitted")
CONSUMER_MODES = ("assign", "subscribe")
GROUP_PROTOCOLS = ("classic", "consumer")
CLIENTS = ("python", "java")  # --client: librdkafka (confluent-kafka-python), or the Kafka Java client
JAVA_CLIENTS_DEFAULT = "4.1.0"  # kafka-clients of the Java client when the brokers run a Kafka before 4.0
SHARE_CLIENTS_DEFAULT = "4.2.2"  # kafka-clients of share group members (KafkaShareConsumer production-ready from 4.2)
SHARE_FEATURE = "share.version"  # the feature that turns share groups on where they are in preview
MAX_RETRIES = 2147483647  # librdkafka's default: retry until delivery.timeout.ms


class ConfigError(ValueError):
    """An invalid option or combination of options; the CLI exits with code 3."""


@dataclass(frozen=True)
class TopicConfig:
    """The test topic: its size and the durability settings under test."""

    name: str = "kchaos"
    partitions: int = 3
    replication_factor: int = 3
    min_insync: int = 2
    unclean: bool = False
    flush_messages: int = 0  # flush.messages: fsync the log every N records; 0 = Kafka's default (never)
    segment_ms: int = 0  # segment.ms: roll a segment this old; 0 = Kafka's default (7 days)


@dataclass(frozen=True)
class ProducerConfig:
    """Producer settings that decide what an acknowledgement promises."""

    acks: str = "all"
    idempotence: bool = False
    retries: int = MAX_RETRIES
    linger_ms: int = 0
    max_in_flight: int = 5
    delivery_timeout_ms: int = 10000
    request_timeout_ms: int = 3000
    # None: librdkafka's (60 s; a transactional producer's: its transaction timeout)
    socket_timeout_ms: int | None = None


@dataclass(frozen=True)
class ClusterConfig:
    """Shape of the Kafka cluster and where its bits come from."""

    nodes: int = 3
    controllers: int = 0  # 0: every node is broker+controller (combined mode)
    # Brokers beyond `nodes`, broker-only and not started with the cluster: the add-broker and decommission nemeses
    # bring them in (and the run's topic is placed on the first `nodes`).
    spares: int = 0
    # A dynamic KRaft quorum (KIP-853, Kafka 3.9+): the controllers found through controller.quorum.bootstrap.servers
    # and formatted with --initial-controllers, so that controllers can be added and removed while the cluster runs.
    dynamic_quorum: bool = False
    kafka_version: str = KAFKA_DEFAULT  # an exact release of core.kafka_versions.LINES
    kafka_dist: str | None = None  # extracted kafka_2.13-3.7.x directory or .tgz
    base_image: str | None = None  # a registry image to use instead of the mmdebstrap-made base
    subnet: str = "172.30.77.0/24"
    replica_lag_time_max_ms: int = 10000
    broker_session_timeout_ms: int = 9000
    startup_timeout_s: float = 120.0
    # "lazyfs": log directories on the lazy FUSE filesystem (unsynced writes can be lost);
    # "plain": the container's own disk; "auto": lazyfs when a nemesis needs it.
    storage: str = "auto"
    # How Kafka's JVM compiles: "c1" stops at the quick compiler (-XX:TieredStopAtLevel=1); "tiered" is the JVM's
    # default, C1 then C2, which pays back only after minutes under load (docs/running.md). Kafka behaves the same.
    kafka_jit: str = "c1"
    # lazyfs's page cache (`kchaos.core.page_cache`): "kernel" writes unsynced data back as the node's Linux
    # does (vm.dirty_expire/writeback_centisecs); "never-written-back" is the worst case.
    page_cache: str = "kernel"
    writeback_age_s: float | None = None  # set the writeback age by hand; 0 = never; None: the model's
    # A hosts file (`kchaos.core.hosts`): run on those machines over SSH instead of in Docker containers.
    hosts: str | None = None
    # Feature levels the storage is formatted with, "NAME=LEVEL" (`kafka-storage format --feature`, Kafka 3.9+),
    # e.g. eligible.leader.replicas.version=1 to turn Eligible Leader Replicas on in a new 4.0 cluster.
    kafka_features: tuple[str, ...] = ()
    # Kafka runs under libfaketime (the clock faults move its wall clock): set by the run's preflight when a
    # clock fault may run, so that no other run's Kafka has a preloaded library in its clock calls.
    faketime: bool = False

    @property
    def backend(self) -> str:
        """The registry name of the backend that provides the nodes (`BACKENDS` in `kchaos.clusters.backends`)."""
        return "ssh" if self.hosts else "docker"


@dataclass(frozen=True)
class WorkloadConfig:
    """The clients: which workload, how many clients and how fast, and the workload's own options."""

    kind: str = "queue"  # the registry name of the workload (`KINDS` in `kchaos.core.workload_kind`)
    producers: int = 4
    consumers: int = 2
    rate: float | str = 100.0  # target sends per second, all producers together, or "max": unthrottled
    in_flight: int = 1  # sends each producer instance keeps outstanding, one logical process per slot
    producer_processes: int = 0  # worker OS processes running the producers; 0 = threads of the harness
    drain_timeout_s: float = 120.0
    # With rate "max": what `kchaos.harness.full_load` picked for the machine and why (cores, picked, explicit, why).
    full_load: dict[str, Any] | None = field(default=None, hash=False)
    # The consumers: assigned every partition (assign), or members of one consumer group (subscribe) rebalancing by
    # the classic protocol or KIP-848's consumer protocol.
    consumer_mode: str = "assign"
    group_protocol: str = "classic"
    # The client library: "python" (librdkafka) or "java" (the Kafka Java client, for the workloads that have one),
    # and for java the version of its kafka-clients jar (4.x: KIP-890 transactions).
    client: str = "python"
    client_version: str | None = None
    # The workload's own options, a frozen dataclass of its package (`WorkloadKind.options`); None: its defaults.
    options: Any = None

    def __post_init__(self) -> None:
        if self.options is None and (kind := known(self.kind)) is not None:  # `validate` refuses an unknown one
            object.__setattr__(self, "options", kind.options())


@dataclass(frozen=True)
class NemesisConfig:
    """Which faults, and how often."""

    names: tuple[str, ...] = ("kill-leader",)
    interval: float = 15.0  # seconds between faults
    jitter: float = 0.3  # fraction of interval, uniform +/-
    restart_delay: float = 5.0  # seconds a killed node stays down (and the shortest any fault lasts)
    schedule_file: str | None = None  # replay this schedule.json instead of drawing one from the seed
    # what `--nemesis mix` draws from (`kchaos.nemesis.mix`); not "operator": an unclean election voids the promise
    mix_families: tuple[str, ...] = ("process", "network", "page-cache", "slow", "disk")
    upgrade_to: str | None = None  # --nemesis upgrade: the release every node is rolled to
    upgrade_then: str = "finalize"  # after the roll: finalize (bump the features), stay, or downgrade (roll back)
    # --nemesis disk-full: the bytes its log directory may still grow by once the disk is full
    disk_full_headroom: int = 4096
    # --nemesis reassign: the inter-broker throttle of each reassignment, bytes a second (0: none)
    reassign_throttle: int = 0


def uses_disk_full(n: NemesisConfig) -> bool:
    """Whether the run may fill a disk: `disk-full` named, or a mix that may draw it (its `disk` family)."""
    return any(s.partition(":")[0] == "disk-full" for s in n.names) or ("mix" in n.names and "disk" in n.mix_families)


@dataclass(frozen=True)
class TestConfig:
    """One test: cluster, topic, clients, faults, duration and seed."""

    __test__ = False  # not a pytest test class

    name: str = "queue"
    seed: int = 0
    time_limit: float = 60.0
    store: str = "results"
    spark_master: str = "local[*]"
    topic: TopicConfig = field(default_factory=TopicConfig)
    producer: ProducerConfig = field(default_factory=ProducerConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    nemesis: NemesisConfig = field(default_factory=NemesisConfig)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field; `from_dict` inverts it."""
        d = asdict(self)
        d["nemesis"]["names"] = list(self.nemesis.names)
        d["nemesis"]["mix_families"] = list(self.nemesis.mix_families)
        d["cluster"]["kafka_features"] = list(self.cluster.kafka_features)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestConfig:
        """Rebuild a config from `to_dict` output; unknown keys are a ConfigError."""
        subs = {"topic": TopicConfig, "producer": ProducerConfig, "cluster": ClusterConfig,
                "workload": WorkloadConfig, "nemesis": NemesisConfig}
        kw: dict[str, Any] = {}
        for key, value in d.items():
            if key in subs:
                kw[key] = _build(subs[key], value, key)
            elif key in {f.name for f in fields(cls)}:
                kw[key] = value
            else:
                raise ConfigError(f"unknown option {key!r}")
        return validate(cls(**kw))

    def with_(self, **changes: Any) -> TestConfig:
        """A copy with top-level fields replaced."""
        return replace(self, **changes)


def workload_kind(name: str) -> WorkloadKind:
    """The workload registered as `name`; ConfigError naming the known ones for any other."""
    try:
        return kind_of(name)
    except UnknownWorkload as e:
        raise ConfigError(str(e)) from None


def with_defaults(test: Mapping[str, Any]) -> dict[str, Any]:
    """A test.json with every configuration field it leaves out filled with its default (its workload's defaults
    for `workload.options`): how a reader sees a test.json that lacks a field (one written by hand)."""
    kind = (test.get("workload") or {}).get("kind") or WorkloadConfig.kind
    workload = WorkloadConfig(kind=kind) if known(kind) is not None else WorkloadConfig()
    return _merged(TestConfig(workload=workload).to_dict(), test)


def _merged(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, Mapping) else v
    return out


def _build(klass: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping")
    known = {f.name for f in fields(klass)}
    for key in value:
        if key not in known:
            raise ConfigError(f"unknown option {where}.{key}")
    if klass is NemesisConfig:
        value = {**value, **{k: tuple(value[k]) for k in ("names", "mix_families") if k in value}}
    if klass is ClusterConfig and "kafka_features" in value:
        value = {**value, "kafka_features": tuple(value["kafka_features"])}
    if klass is WorkloadConfig and value.get("options") is not None:
        kind = workload_kind(value.get("kind", WorkloadConfig.kind))
        value = {**value, "options": _build(kind.options, value["options"], f"{where}.options")}
    return klass(**value)


UPGRADE_THEN = ("finalize", "stay", "downgrade")


def _check_upgrade(n: NemesisConfig, c: ClusterConfig) -> None:
    """--upgrade-to and --upgrade-then: only with --nemesis upgrade, which needs them; a release kchaos runs,
    newer than --kafka-version (Kafka rolls back only a roll whose features were not finalized: --upgrade-then
    downgrade)."""
    if "upgrade" not in n.names:
        require(n.upgrade_to is None, "--upgrade-to applies to --nemesis upgrade only")
        return
    require(n.upgrade_then in UPGRADE_THEN,
           f"--upgrade-then must be one of {', '.join(UPGRADE_THEN)}; got {n.upgrade_then!r}")
    require(n.upgrade_to is not None, "--nemesis upgrade needs --upgrade-to VERSION, the release to roll every node to")
    require(not c.kafka_dist, "--nemesis upgrade rolls between releases from Maven Central; it takes no --kafka-dist")
    to = upgrade_release(str(n.upgrade_to))
    require(to == n.upgrade_to, f"--upgrade-to {n.upgrade_to} names a line: give its release {to}")
    require(release_key(to) > release_key(c.kafka_version),
           f"--upgrade-to {to} is not newer than --kafka-version {c.kafka_version}: a rolling downgrade is "
           "--upgrade-then downgrade, after the roll up")


def feature_flags_at_format(kafka_version: str) -> bool:
    """Whether the storage tool of Kafka `kafka_version` takes `--feature NAME=LEVEL` (3.9 and later)."""
    return release_key(kafka_version)[:2] >= (3, 9)


def kafka_major(kafka_version: str) -> int:
    """The major release of a Kafka version like 3.7.2 (4 for 4.1.0); 0 for anything not like that."""
    m = re.fullmatch(r"(\d+)\.\d+\.\d+", kafka_version)
    return int(m.group(1)) if m else 0


def exact_kafka_version(text: str) -> str:
    """The exact release `text` names (a line like 4.2 gives its latest patch); `text` itself when kchaos cannot
    run it, for `validate` to reject with its one-line reason."""
    try:
        return resolve_version(text)
    except UnsupportedVersion:
        return text


def upgrade_release(text: str) -> str:
    """The exact release `--upgrade-to TEXT` names (a line gives its latest patch); ConfigError, one line, when
    kchaos cannot run it."""
    try:
        return resolve_version(text)
    except UnsupportedVersion as e:
        raise ConfigError(str(e).replace("--kafka-version", "--upgrade-to", 1)) from None


def java_clients_version(kafka_version: str, since: str | None = None) -> str:
    """The kafka-clients version `--client java` uses with brokers of `kafka_version`: the same release from 4.0 on
    (its jars are already cached with the brokers'), else JAVA_CLIENTS_DEFAULT; and `since` where that is older
    (a workload whose clients need a newer kafka-clients)."""
    version = kafka_version if kafka_major(kafka_version) >= 4 else JAVA_CLIENTS_DEFAULT
    return since if since is not None and release_key(version) < release_key(since) else version


def share_groups_on(c: ClusterConfig) -> bool:
    """Whether a cluster of `c` has share groups: a line where they are production-ready (4.2 and later), or a line
    where they are in preview (4.1) formatted with --kafka-feature share.version=1 or higher."""
    try:
        line = line_of(c.kafka_version)
    except UnsupportedVersion:
        return False
    levels = [int(f.partition("=")[2]) for f in c.kafka_features if f.partition("=")[0] == SHARE_FEATURE]
    return line.share_groups or (line.share_preview and bool(levels) and levels[-1] >= 1)


def txn_timeout_ms(p: ProducerConfig) -> int:
    """transaction.timeout.ms of the transactional producers: the delivery timeout and 5 s more."""
    return p.delivery_timeout_ms + 5000


def require(cond: bool, msg: str) -> None:
    """ConfigError(msg) unless `cond`."""
    if not cond:
        raise ConfigError(msg)


def is_int(v: Any) -> bool:
    """Whether `v` is an int and not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_fraction(v: Any, below_one: bool = False) -> bool:
    """Whether `v` is a number in [0, 1] ([0, 1) with `below_one`), not a bool."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v
            and (v < 1 if below_one else v <= 1))


def validate(cfg: TestConfig, check_nemesis: Callable[[str], None] | None = None) -> TestConfig:
    """Return `cfg` unchanged if it is runnable, else raise ConfigError naming the problem.

    `check_nemesis(spec)` raises ValueError for a nemesis name it does not know.
    """
    t, p, c, w, n = cfg.topic, cfg.producer, cfg.cluster, cfg.workload, cfg.nemesis
    require(bool(re.fullmatch(r"[A-Za-z0-9._-]{1,64}", cfg.name)),
           f"test name {cfg.name!r} must be 1-64 of letters, digits, '.', '_' or '-'")
    require(is_int(cfg.seed) and cfg.seed >= 0, f"--seed must be a non-negative integer, got {cfg.seed!r}")
    require(cfg.time_limit > 0, f"--time-limit must be positive, got {cfg.time_limit}")
    require(bool(re.fullmatch(r"[A-Za-z0-9._-]{1,200}", t.name)),
           f"topic name {t.name!r} is not a legal Kafka topic name")
    require(is_int(c.nodes) and 1 <= c.nodes <= 9, f"--nodes must be 1..9, got {c.nodes}")
    require(is_int(c.spares) and 0 <= c.spares <= 9 - c.nodes,
            f"--spares must be 0..{9 - c.nodes} (at most 9 brokers with --nodes), got {c.spares}")
    require(not (c.spares and c.hosts), "--spares applies to the Docker backend; a hosts file names every broker")
    require(not c.dynamic_quorum or feature_flags_at_format(c.kafka_version),
            f"--dynamic-quorum needs Kafka 3.9 or later (KIP-853), not --kafka-version {c.kafka_version}")
    require(not (c.dynamic_quorum and c.hosts), "--dynamic-quorum applies to the Docker backend")
    require(is_int(c.controllers) and c.controllers in (0, 1, 3, 5),
           f"--controllers must be 0 (combined mode), 1, 3 or 5, got {c.controllers}")
    require(is_int(t.partitions) and t.partitions >= 1, f"--partitions must be >= 1, got {t.partitions}")
    require(is_int(t.replication_factor) and t.replication_factor >= 1,
            f"--rf must be >= 1, got {t.replication_factor}")
    for f in c.kafka_features:
        require(bool(re.fullmatch(r"[a-z][a-z0-9._]*=\d+", f)),
               f"--kafka-feature must be NAME=LEVEL (like eligible.leader.replicas.version=1), got {f!r}")
    require(not c.kafka_features or feature_flags_at_format(c.kafka_version),
           f"--kafka-feature needs Kafka 3.9 or later (its storage tool's --feature), not --kafka-version "
           f"{c.kafka_version}")
    require(t.replication_factor <= c.nodes,
           f"--rf {t.replication_factor} is larger than --nodes {c.nodes}: a partition needs one broker per replica")
    require(is_int(t.min_insync) and t.min_insync >= 1, f"--min-insync must be >= 1, got {t.min_insync}")
    require(t.min_insync <= t.replication_factor,
           f"--min-insync {t.min_insync} is larger than --rf {t.replication_factor}: "
           "acks=all writes could never succeed")
    require(is_int(t.flush_messages) and t.flush_messages >= 0,
           f"--flush-messages must be >= 0 (0: Kafka's default, never), got {t.flush_messages}")
    require(is_int(t.segment_ms) and t.segment_ms >= 0,
           f"--segment-ms must be >= 0 (0: Kafka's default, 7 days), got {t.segment_ms}")
    require(p.acks in ACKS, f"--acks must be one of 0, 1, all; got {p.acks!r}")
    require(is_int(p.retries) and 0 <= p.retries <= MAX_RETRIES, f"--retries must be 0..{MAX_RETRIES}, got {p.retries}")
    require(is_int(p.linger_ms) and p.linger_ms >= 0, f"--linger-ms must be >= 0, got {p.linger_ms}")
    require(is_int(p.max_in_flight) and p.max_in_flight >= 1, f"--max-in-flight must be >= 1, got {p.max_in_flight}")
    require(p.request_timeout_ms > 0 and p.delivery_timeout_ms >= p.request_timeout_ms + p.linger_ms,
           "delivery timeout must be >= request timeout + linger")
    require(p.socket_timeout_ms is None or (is_int(p.socket_timeout_ms) and p.socket_timeout_ms >= 10),
           f"--socket-timeout-ms must be >= 10, got {p.socket_timeout_ms}")
    kind = workload_kind(w.kind)
    if p.socket_timeout_ms is not None and kind.transactional:
        require(p.socket_timeout_ms <= txn_timeout_ms(p) + 100,
               f"--socket-timeout-ms must be <= the transaction timeout + 100 ms ({txn_timeout_ms(p) + 100}: "
               "--delivery-timeout-ms + 5000 + 100), as librdkafka requires of a transactional producer")
    if p.idempotence:
        require(p.acks == "all", f"--idempotence needs --acks all (Kafka refuses it with acks={p.acks})")
        require(p.max_in_flight <= 5, "--idempotence needs --max-in-flight <= 5")
        require(p.retries > 0, "--idempotence needs --retries > 0")
    require(w.rate == "max" or (isinstance(w.rate, (int, float)) and not isinstance(w.rate, bool)
                               and 0 < w.rate < float("inf")),
           f"--rate must be a positive number or max, got {w.rate}")
    require(is_int(w.producers) and w.producers >= 1, f"--producers must be >= 1, got {w.producers}")
    require(is_int(w.consumers) and w.consumers >= 0, f"--consumers must be >= 0, got {w.consumers}")
    require(is_int(w.in_flight) and w.in_flight >= 1, f"--in-flight must be >= 1, got {w.in_flight}")
    require(is_int(w.producer_processes) and 0 <= w.producer_processes <= w.producers,
           f"--producer-processes must be 0..--producers ({w.producers}), got {w.producer_processes}")
    require(w.drain_timeout_s > 0, "drain timeout must be positive")
    require(w.consumer_mode in CONSUMER_MODES,
            f"--consumer-mode must be one of {', '.join(CONSUMER_MODES)}; got {w.consumer_mode!r}")
    require(w.group_protocol in GROUP_PROTOCOLS,
            f"--group-protocol must be one of {', '.join(GROUP_PROTOCOLS)}; got {w.group_protocol!r}")
    if w.consumer_mode == "subscribe":
        require(w.group_protocol != "consumer" or kafka_major(c.kafka_version) >= 4,
                f"--group-protocol consumer (KIP-848) needs Kafka 4.0 or later, not --kafka-version {c.kafka_version}")
    require(w.client in CLIENTS, f"--client must be one of {', '.join(CLIENTS)}; got {w.client!r}")
    if w.client == "java":
        require(w.client in kind.clients, f"--client java runs only --workload "
                f"{' or '.join(k.name for k in all_kinds() if 'java' in k.clients)}, not {w.kind}")
        require(isinstance(w.client_version, str)
                and bool(re.fullmatch(r"([4-9]|\d\d+)\.\d+\.\d+", w.client_version)),
                f"the Java client needs kafka-clients 4.0 or later, got {w.client_version!r}")
    else:
        require(w.client_version is None, "a kafka-clients version applies only to --client java")
    require(isinstance(w.options, kind.options), f"workload options of {w.kind} must be its own, got {w.options!r}")
    kind.validate(cfg)
    require(n.interval > 0, f"--interval must be positive, got {n.interval}")
    require(0 <= n.jitter < 1, f"--jitter must be in [0, 1), got {n.jitter}")
    require(n.restart_delay >= 0, f"--restart-delay must be >= 0, got {n.restart_delay}")
    require(is_int(n.disk_full_headroom) and n.disk_full_headroom >= 0,
            f"--disk-full-headroom must be a number of bytes >= 0, got {n.disk_full_headroom!r}")
    require(is_int(n.reassign_throttle) and n.reassign_throttle >= 0,
            f"--reassign-throttle must be a number of bytes a second >= 0, got {n.reassign_throttle!r}")
    twice = sorted({x for x in n.names if n.names.count(x) > 1})
    require(not twice, f"--nemesis names {', '.join(twice)} more than once")
    _check_upgrade(n, c)
    if check_nemesis is not None:
        for name in n.names:
            try:
                check_nemesis(name)
            except ValueError as e:
                raise ConfigError(str(e)) from None
    try:
        net = ipaddress.ip_network(c.subnet)
    except ValueError:
        raise ConfigError(f"--subnet {c.subnet!r} is not a network like 172.30.77.0/24") from None
    require(net.version == 4 and net.is_private and net.num_addresses >= 32,
           f"--subnet {c.subnet} must be a private IPv4 network of /27 or larger")
    if not c.kafka_dist:  # a user's distribution brings its own version
        try:
            require(resolve_version(c.kafka_version) == c.kafka_version,
                   f"--kafka-version {c.kafka_version} names a line: "
                   f"give its release {resolve_version(c.kafka_version)}")
        except UnsupportedVersion as e:
            raise ConfigError(str(e)) from None
    require(c.storage in STORAGES, f"--storage must be one of {', '.join(STORAGES)}; got {c.storage!r}")
    require(c.kafka_jit in KAFKA_JITS, f"--kafka-jit must be one of {', '.join(KAFKA_JITS)}; got {c.kafka_jit!r}")
    require(c.page_cache in PAGE_CACHE_MODELS,
           f"--page-cache must be one of {', '.join(PAGE_CACHE_MODELS)}; got {c.page_cache!r}")
    require(c.writeback_age_s is None or c.writeback_age_s >= 0,
           f"--writeback-age must be >= 0 seconds, got {c.writeback_age_s}")
    require(not (c.page_cache == NEVER_WRITTEN_BACK and c.writeback_age_s),
           f"--page-cache {NEVER_WRITTEN_BACK} never writes back: it takes no --writeback-age {c.writeback_age_s:g}"
           if c.writeback_age_s else "")
    require(c.replica_lag_time_max_ms > 0 and c.broker_session_timeout_ms > 0, "Kafka timeouts must be positive")
    return cfg
