"""`kchaos run`'s options: the argparse definitions and the TestConfig they build.

The command line adds them to its `run` subcommand; suite and scenario files
(harness/spec_files.py) parse their run options with the same definitions.
"""
from __future__ import annotations

import argparse
import secrets

from harness.config import (ClusterConfig, ConfigError, NemesisConfig, ProducerConfig, TestConfig,
                            TopicConfig, WorkloadConfig)

D = TestConfig()  # every option's default


def _csv(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in s.split(",") if x.strip())


def spark_options(p: argparse.ArgumentParser) -> None:
    """--spark-master and --spark-driver-host: where a subcommand that checks runs its Spark job."""
    p.add_argument("--spark-master", default=D.spark_master,
                   help="where the checker runs: local[N] (default local[*]) or an existing cluster, "
                        "spark://HOST:7077 (see docs/checkers.md)")
    p.add_argument("--spark-driver-host", default=None, metavar="ADDR",
                   help="local address the Spark driver binds and advertises, for a remote --spark-master "
                        "whose executors must connect back (default: 127.0.0.1)")


def add_run_options(r: argparse.ArgumentParser) -> None:
    """Every `kchaos run` option; suite and scenario files name the same options (harness/spec_files.py)."""
    r.add_argument("--name", default=D.name, help="test name (directory under the store)")
    r.add_argument("--nodes", type=int, default=D.cluster.nodes, help="brokers (n1..nN)")
    r.add_argument("--controllers", type=int, default=D.cluster.controllers,
                   help="dedicated KRaft controllers; 0 = combined broker+controller nodes")
    r.add_argument("--partitions", type=int, default=D.topic.partitions)
    r.add_argument("--rf", type=int, default=D.topic.replication_factor, help="replication factor")
    r.add_argument("--min-insync", type=int, default=D.topic.min_insync, help="min.insync.replicas")
    r.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=D.topic.unclean,
                   help="unclean.leader.election.enable")
    r.add_argument("--flush-messages", type=int, default=D.topic.flush_messages, metavar="N",
                   help="flush.messages: fsync the log every N records (default 0: never, Kafka's default)")
    r.add_argument("--acks", default=D.producer.acks, help="0, 1 or all")
    r.add_argument("--idempotence", action=argparse.BooleanOptionalAction, default=D.producer.idempotence)
    r.add_argument("--retries", type=int, default=D.producer.retries)
    r.add_argument("--linger-ms", type=int, default=D.producer.linger_ms)
    r.add_argument("--max-in-flight", type=int, default=D.producer.max_in_flight)
    r.add_argument("--delivery-timeout-ms", type=int, default=D.producer.delivery_timeout_ms)
    r.add_argument("--request-timeout-ms", type=int, default=D.producer.request_timeout_ms)
    r.add_argument("--nemesis", type=_csv, default=None,
                   help="comma-separated faults, each optionally NAME:TARGET (e.g. kill:majority), or none; "
                        "see docs/nemeses.md (default: kill-leader)")
    r.add_argument("--mix-families", type=_csv, default=None, metavar="FAMILIES",
                   help="with --nemesis mix: comma-separated fault families it draws from: process, network, "
                        "page-cache, slow, operator (default: all but operator)")
    r.add_argument("--schedule", default=None, metavar="FILE",
                   help="replay this schedule.json (from a run directory or written by hand) instead of "
                        "drawing faults from the seed; the nemeses are the ones it names")
    r.add_argument("--interval", type=float, default=D.nemesis.interval, help="seconds between faults")
    r.add_argument("--jitter", type=float, default=D.nemesis.jitter, help="fraction of interval")
    r.add_argument("--restart-delay", type=float, default=D.nemesis.restart_delay,
                   help="seconds a killed node stays down")
    r.add_argument("--time-limit", type=float, default=D.time_limit, help="seconds of workload")
    r.add_argument("--rate", type=float, default=D.workload.rate, help="target sends per second")
    r.add_argument("--producers", type=int, default=D.workload.producers)
    r.add_argument("--consumers", type=int, default=D.workload.consumers)
    r.add_argument("--in-flight", type=int, default=D.workload.in_flight, metavar="N",
                   help="sends each producer keeps outstanding, each slot its own logical process "
                        "(1: one send, wait for its report, the next)")
    r.add_argument("--producer-processes", type=int, default=D.workload.producer_processes, metavar="K",
                   help="run the producers in K worker processes, each recording its own stream merged "
                        "into history.jsonl after the run (0: threads of the harness)")
    r.add_argument("--seed", type=int, default=None, help="seed for every random choice (default: random)")
    r.add_argument("--kafka-version", default=D.cluster.kafka_version)
    r.add_argument("--kafka-dist", default=None, help="extracted kafka_2.13-3.7.x directory or .tgz (or KAFKA_HOME)")
    r.add_argument("--base-image", default=None, help="existing image to build nodes on instead of debootstrap")
    r.add_argument("--subnet", default=D.cluster.subnet)
    r.add_argument("--hosts", default=None, metavar="FILE",
                   help="run on the machines of this hosts file over SSH instead of in Docker containers "
                        "(docs/hosts.md); --nodes and --controllers then come from the file")
    r.add_argument("--replica-lag-time-max-ms", type=int, default=D.cluster.replica_lag_time_max_ms)
    r.add_argument("--broker-session-timeout-ms", type=int, default=D.cluster.broker_session_timeout_ms)
    r.add_argument("--storage", default=D.cluster.storage,
                   help="lazyfs (unsynced writes can be lost on power-fail), plain, or auto: lazyfs when a "
                        "nemesis needs it")
    r.add_argument("--writeback-age", type=float, default=D.cluster.writeback_age_s, metavar="SECONDS",
                   help="lazyfs writes unsynced data through once it is this old (the kernel's dirty expiry); "
                        "0 = never")
    r.add_argument("--store", default=D.store, help="results root")
    spark_options(r)
    r.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")


def config_from_args(a: argparse.Namespace) -> TestConfig:
    """A TestConfig from parsed `run` arguments (not yet validated)."""
    seed = a.seed if a.seed is not None else secrets.randbelow(2**31)
    if a.schedule and a.nemesis:
        raise ConfigError("--schedule names its own nemeses; drop --nemesis")
    if a.mix_families is not None and "mix" not in (a.nemesis or ()):
        raise ConfigError("--mix-families only applies to --nemesis mix")
    return TestConfig(
        name=a.name, seed=seed, time_limit=a.time_limit, store=a.store, spark_master=a.spark_master,
        topic=TopicConfig(partitions=a.partitions, replication_factor=a.rf, min_insync=a.min_insync,
                          unclean=a.unclean, flush_messages=a.flush_messages),
        producer=ProducerConfig(acks=str(a.acks), idempotence=a.idempotence, retries=a.retries,
                                linger_ms=a.linger_ms, max_in_flight=a.max_in_flight,
                                delivery_timeout_ms=a.delivery_timeout_ms, request_timeout_ms=a.request_timeout_ms),
        cluster=ClusterConfig(nodes=a.nodes, controllers=a.controllers, kafka_version=a.kafka_version,
                              kafka_dist=a.kafka_dist, base_image=a.base_image, subnet=a.subnet,
                              replica_lag_time_max_ms=a.replica_lag_time_max_ms,
                              broker_session_timeout_ms=a.broker_session_timeout_ms, storage=a.storage,
                              writeback_age_s=a.writeback_age, hosts=a.hosts),
        workload=WorkloadConfig(producers=a.producers, consumers=a.consumers, rate=a.rate,
                                in_flight=a.in_flight, producer_processes=a.producer_processes),
        nemesis=NemesisConfig(names=a.nemesis or D.nemesis.names, interval=a.interval, jitter=a.jitter,
                              restart_delay=a.restart_delay, schedule_file=a.schedule,
                              mix_families=D.nemesis.mix_families if a.mix_families is None else a.mix_families),
    )
