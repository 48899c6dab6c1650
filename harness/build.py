"""The test as a value, as a Jepsen test map: one function builds it from the configuration.

`build_test(cfg)` checks the configuration against every registry (backends, workloads, nemeses)
and returns a `Test` holding the parts a run composes: the provisioner of its nodes, its
workload, its nemesis packages and its fault schedule. Only this module reads the registries;
the runner composes whatever parts a Test holds and names no concrete class.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import kchaos.nemesis as nemeses
from kchaos.clusters.backends import BACKENDS
from kchaos.clusters.cluster import KafkaCluster, Provisioner
from kchaos.clusters.distribution import DistributionError, KafkaDist, check_user_dist, resolve
from kchaos.core.cache import cache_dir
from kchaos.core.config import ConfigError, TestConfig, validate, workload_kind
from kchaos.core.faults import FaultKind
from kchaos.core.hosts import HostsFile, load_hosts
from kchaos.core.kafka_versions import UnsupportedVersion, tools_record
from kchaos.core.protocols import Cluster, Nemesis, Workload
from kchaos.core.suggest import did_you_mean
from kchaos.core.workload_kind import kind_of
from kchaos.nemesis.base import ScheduledOp
from kchaos.nemesis.mix import lazy_families
from kchaos.nemesis.schedule import make_schedule, schedule_names, specs_in
from kchaos.nemesis.targets import COORDINATORS, KINDS
from kchaos.workloads.java_build import JavaBuildError, JavaProgram, compile_client, jdk_problem


@dataclass(frozen=True)
class Test:
    """One test: its configuration and the parts that run it. `nemeses(cluster)` makes the nemesis of each
    spec the schedule uses, aimed at that cluster; `faults` says what each of them breaks and mends."""

    __test__ = False  # not a pytest test class

    cfg: TestConfig
    provisioner: Provisioner
    workload: Workload
    schedule: list[ScheduledOp]
    specs: tuple[str, ...]
    make_nemesis: Callable[[str, Cluster, TestConfig], Nemesis]
    faults: tuple[FaultKind, ...]
    dist: KafkaDist
    upgrade_dist: KafkaDist | None = None  # the release --nemesis upgrade rolls to, resolved before anything runs
    hosts: HostsFile | None = None

    def cluster(self, run_dir: Path, say: Callable[[str], None]) -> KafkaCluster:
        """The test's Kafka cluster on the provisioner's nodes, keeping its files in `run_dir`."""
        return KafkaCluster(self.cfg.cluster, self.provisioner, run_dir, say=say)

    def nemeses(self, cluster: Cluster) -> dict[str, Nemesis]:
        """A nemesis per spec of the schedule, aimed at `cluster`, in the order they heal: the packages that
        heal first (network faults) before the others, each group in the specs' order."""
        ordered = sorted(self.specs, key=lambda s: not nemeses.split(s)[0].heal_first)
        return {s: self.make_nemesis(s, cluster, self.cfg) for s in ordered}

    def record(self) -> dict[str, Any]:
        """What test.json adds for this test beyond its configuration: the hosts file as read (with
        every default written out), when the nodes are hosts; the Kafka line's tools and logging (`kafka_tools`:
        which release's tools ran, the classes kchaos calls), when kchaos lists the line."""
        out: dict[str, Any] = {"hosts_file": self.hosts.to_dict()} if self.hosts else {}
        try:
            out["kafka_tools"] = tools_record(self.dist.version)
        except UnsupportedVersion:
            pass
        return out


# What a run lacks when a coordinator target has nothing to aim at, and how to give it some.
NO_KEYS = {"group": "consumer group (--consumer-mode subscribe, or --workload txn or copy)",
           "txn": "transactional id (--workload txn or copy)",
           "share": "share group (--workload share)"}


def preflight(cfg: TestConfig) -> TestConfig:
    """Every check that needs no cluster: options, nemesis names, schedule file, store path, --kafka-dist,
    the hosts file.

    Returns the config made concrete: nemesis names from a replayed schedule,
    storage "auto" resolved to lazyfs or plain, the hosts file's path absolute
    and the node count its brokers'. Raises ConfigError on bad input.
    """
    from kchaos.core.store import check_store

    n = cfg.nemesis
    if n.schedule_file:
        path = str(Path(n.schedule_file).expanduser().resolve())
        cfg = cfg.with_(nemesis=replace(n, schedule_file=path, names=schedule_names(Path(path))))
    if cfg.cluster.hosts:
        cfg = _from_hosts(cfg, load_hosts(cfg.cluster.hosts))
    kind = workload_kind(cfg.workload.kind)
    validate(cfg, lambda spec: _check_nemesis(spec, cfg.topic.partitions))
    clients = [s for s in cfg.nemesis.names if s != "none" and s != "mix" and nemeses.split(s)[0].needs_workload]
    if clients and not kind.crashable(cfg):
        raise ConfigError(f"--nemesis {clients[0]} crashes group members: it needs --consumer-mode subscribe "
                          "(or --workload txn or copy)")
    for spec in cfg.nemesis.names:
        target = spec.partition(":")[2]
        if target in COORDINATORS and not kind.coordinators(cfg).get(COORDINATORS[target][1]):
            raise ConfigError(f"--nemesis {spec}: this run has no {NO_KEYS[COORDINATORS[target][1]]}")
    quorum = [s for s in cfg.nemesis.names if s not in ("none", "mix")
              and nemeses.split(s)[0].needs_controllers > cfg.cluster.controllers]
    if quorum:
        need = nemeses.split(quorum[0])[0].needs_controllers
        raise ConfigError(f"--nemesis {quorum[0]} cuts the controller quorum apart from the brokers: it needs "
                          f"--controllers {need} or more (dedicated controllers), not {cfg.cluster.controllers}")
    if any(s.partition(":")[0] == "corrupt" for s in cfg.nemesis.names) and not cfg.topic.segment_ms:
        raise ConfigError("--nemesis corrupt flips bits in closed segments: give --segment-ms (e.g. 10000) so "
                          "the topic rolls its segments during the run")
    named = {s.partition(":")[0] for s in cfg.nemesis.names}
    if (changes := sorted({"remove-controller", "replace-controller"} & named)) and not cfg.cluster.dynamic_quorum:
        raise ConfigError(f"--nemesis {changes[0]} changes the controller quorum's voters: it needs "
                          "--dynamic-quorum (Kafka 3.9+, KIP-853)")
    if "add-broker" in named and not cfg.cluster.spares:
        raise ConfigError("--nemesis add-broker starts a spare broker: give --spares N")
    if {"decommission", "reassign"} & named and not cfg.cluster.spares \
            and cfg.cluster.nodes <= cfg.topic.replication_factor:
        which = sorted({"decommission", "reassign"} & named)[0]
        raise ConfigError(f"--nemesis {which} moves replicas to a broker that holds none: give --spares N, or more "
                          f"--nodes than --rf {cfg.topic.replication_factor}")
    if cfg.workload.client == "java" and (problem := jdk_problem()):
        raise ConfigError(problem)
    make_schedule(cfg)  # a replayed schedule is checked entry by entry here
    lazy = nemeses.needs_lazyfs(cfg.nemesis.names, cfg.nemesis.mix_families)
    if cfg.cluster.storage == "auto":
        cfg = cfg.with_(cluster=replace(cfg.cluster, storage="lazyfs" if lazy else "plain"))
    elif lazy and cfg.cluster.storage != "lazyfs":
        raise ConfigError(f"nemeses {', '.join(cfg.nemesis.names)} need --storage lazyfs (or auto), "
                          f"not {cfg.cluster.storage}")
    if nemeses.needs_faketime(cfg.nemesis.names, cfg.nemesis.mix_families):
        cfg = cfg.with_(cluster=replace(cfg.cluster, faketime=True))
    check_store(cfg.store)
    if cfg.cluster.kafka_dist:
        try:
            check_user_dist(cfg.cluster.kafka_dist)
        except DistributionError as e:
            raise ConfigError(str(e)) from None
    return cfg


def java_client(version: str, kafka_dist: str | None = None) -> JavaProgram:
    """The Java client (txn, copy) compiled against kafka-clients `version` (the distribution cache's jars of that Kafka
    release; `kafka_dist` when it is that release), cached; DistributionError when it cannot be had."""
    dist = resolve(version, kafka_dist) if kafka_dist else None
    libs = dist.libs if dist is not None and dist.version == version else resolve(version).libs
    try:
        return compile_client(libs, cache_dir() / "java-client")
    except JavaBuildError as e:
        raise DistributionError(f"the Java client: {e}") from None


def _workload(cfg: TestConfig) -> Workload:
    """The workload of the registry; `--client java` hands it the compiled Java client."""
    w = cfg.workload
    java = java_client(str(w.client_version), cfg.cluster.kafka_dist) if w.client == "java" else None
    return kind_of(w.kind).make(cfg, java=java)


def _check_nemesis(spec: str, partitions: int) -> None:
    """nemesis.check_spec, naming the nemesis or target probably meant when one is unknown."""
    name, _, target = spec.partition(":")
    if name not in nemeses.NAMES:
        raise ValueError(f"unknown nemesis {name!r}{did_you_mean(name, nemeses.NAMES)}; "
                         f"known: {', '.join(sorted(nemeses.NAMES))}")
    kind = target.partition(":")[0]
    if target and kind not in KINDS and (hint := did_you_mean(kind, KINDS)):
        raise ValueError(f"nemesis {spec!r}: unknown target {kind!r}{hint}; targets: {', '.join(KINDS)}")
    nemeses.check_spec(spec, partitions)


def _from_hosts(cfg: TestConfig, hosts: HostsFile) -> TestConfig:
    """The cluster's shape from the hosts file: its brokers, and its dedicated controllers if any."""
    if hosts.external:
        _external_faults(cfg, hosts)
        if cfg.cluster.storage == "auto":
            cfg = cfg.with_(cluster=replace(cfg.cluster, storage="plain"))
        elif cfg.cluster.storage != "plain":
            raise ConfigError(f"{hosts.path}: an external Kafka keeps its own storage: --storage "
                              f"{cfg.cluster.storage} cannot apply (use plain or auto)")
        if cfg.cluster.kafka_features:
            raise ConfigError(f"{hosts.path}: an external Kafka's storage is formatted already: --kafka-feature "
                              "cannot apply (upgrade its features with kafka-features)")
    dedicated = sum(1 for h in hosts.nodes if h.is_controller and not h.is_broker)
    return cfg.with_(cluster=replace(cfg.cluster, hosts=str(hosts.path), nodes=len(hosts.brokers),
                                     controllers=dedicated))


def _external_faults(cfg: TestConfig, hosts: HostsFile) -> None:
    """ConfigError for a fault an operator's own Kafka cannot take: kchaos cannot put its log directory
    on lazyfs (power and disk faults), cannot name its process for a duty cycle (cpu-starve), does not own
    its jars (upgrade), does not start it under libfaketime (clock faults), only reads its data_dir (corrupt
    would write into its segments, wipe empty it), and pauses it only with the file's pause and resume commands."""
    n = cfg.nemesis
    specs = [s for s in n.names if s not in ("none", "mix")]
    bad = [s for s in specs if nemeses.split(s)[0].needs_lazyfs or nemeses.split(s)[0].needs_faketime
           or nemeses.split(s)[0].name in ("cpu-starve", "upgrade", "corrupt", "wipe",
                                                                 "replace-controller")]
    if "mix" in n.names and nemeses.needs_lazyfs(("mix",), n.mix_families):
        fams = lazy_families(n.mix_families)
        bad.append(f"mix (its {', '.join(fams)} famil{'y' if len(fams) == 1 else 'ies'})")
    if "mix" in n.names and nemeses.needs_faketime(("mix",), n.mix_families):
        bad.append("mix (its clock family)")
    if not hosts.can_pause:
        bad += [s for s in specs if "pause" in nemeses.split(s)[0].fs]
    if bad:
        raise ConfigError(f"{hosts.path}: an external Kafka cannot take {', '.join(bad)} (docs/hosts.md)")


def build_test(cfg: TestConfig) -> Test:
    """The Test for `cfg` (already through `preflight`): its parts looked up in the registries, the
    Kafka distribution resolved (cached), the schedule drawn from the seed or read from the file."""
    c = cfg.cluster
    schedule = make_schedule(cfg)
    specs = tuple(specs_in(cfg.nemesis.names, schedule))
    workload = _workload(cfg)

    def make_nemesis(spec: str, cluster: Cluster, cfg_: TestConfig) -> Nemesis:
        pkg = nemeses.split(spec)[0]
        return pkg.make(cluster, cfg_, workload) if pkg.needs_workload else pkg.make(cluster, cfg_)

    return Test(
        cfg=cfg,
        provisioner=BACKENDS[c.backend](cfg),
        workload=workload,
        schedule=schedule,
        specs=specs,
        make_nemesis=make_nemesis,
        faults=tuple(nemeses.fault_kind(s) for s in specs),
        dist=resolve(c.kafka_version, c.kafka_dist),
        upgrade_dist=resolve(cfg.nemesis.upgrade_to) if "upgrade" in specs and cfg.nemesis.upgrade_to else None,
        hosts=load_hosts(c.hosts) if c.hosts else None,
    )
