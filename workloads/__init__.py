"""Workloads: one package each (`queue/`, `txn/`, `copy/`), registered by one line in
`kchaos.core.workload_kind.KINDS`. A package's `KIND` says what the rest of kchaos asks of the workload; its
clients implement core.protocols.Workload. The modules here are the clients' shared plumbing (librdkafka
settings, the final read, rebalance lines, the Java client's build)."""
