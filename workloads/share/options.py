"""The share workload's own options: test.json's `workload.options` for `--workload share`."""
from __future__ import annotations

from dataclasses import dataclass, field

ACK_KINDS = ("accept", "release", "reject", "none")
DEFAULT_MIX = "accept=90,release=6,reject=2,none=2"
COMMITS = ("sync", "async", "implicit")
# The bounds kchaos's brokers put on a group's acquisition lock (group.share.min/max.record.lock.duration.ms) and
# on its delivery count limit (Kafka's own group.share.min/max.delivery.count.limit).
MIN_LOCK_MS, MAX_LOCK_MS = 1000, 60000
MIN_DELIVERY_LIMIT, MAX_DELIVERY_LIMIT = 2, 10
BROKERS_DELIVERY_LIMIT = 5  # group.share.delivery.count.limit's default: the limit on a line without the group config


def parse_mix(text: str) -> dict[str, int]:
    """`accept=90,release=6,reject=2,none=2` as weights by kind; ValueError, one line, for anything else."""
    out = dict.fromkeys(ACK_KINDS, 0)
    for part in str(text).split(","):
        name, sep, weight = part.strip().partition("=")
        if not sep or name not in out or not weight.isdigit():
            raise ValueError(f"--share-ack-mix takes KIND=WEIGHT,... with KIND one of {', '.join(ACK_KINDS)} and "
                             f"WEIGHT a whole number; got {text!r}")
        out[name] = int(weight)
    if out["accept"] + out["reject"] == 0:
        raise ValueError(f"--share-ack-mix must give accept or reject some weight, or no record is ever done; "
                         f"got {text!r}")
    return out


@dataclass(frozen=True)
class ShareOptions:
    """How the share group's members acknowledge what they are delivered, the group's acquisition lock and its
    delivery count limit. Each field's metadata is its `kchaos run` option: `flag`, `help`, `metavar`."""

    ack_mix: str = field(default=DEFAULT_MIX, metadata={
        "flag": "--share-ack-mix", "metavar": "KIND=W,...",
        "help": "the weights with which a member acknowledges each record it is delivered: accept, release, reject, "
                "or none (held unacknowledged past its acquisition lock, then accepted: a commit that should fail)"})
    lock_ms: int = field(default=15000, metadata={
        "flag": "--share-lock-ms", "metavar": "MS",
        "help": f"the group's record acquisition lock, share.record.lock.duration.ms ({MIN_LOCK_MS}..{MAX_LOCK_MS})"})
    commit: str = field(default="sync", metadata={
        "flag": "--share-commit", "metavar": "{" + ",".join(COMMITS) + "}",
        "help": "how members commit their acknowledgements: sync (commitSync, each record acknowledged as the mix "
                "draws), async (commitAsync, the outcome from the acknowledgement commit callback) or implicit "
                "(implicit acknowledgement mode: the next poll accepts every record the last one returned; no mix)"})
    delivery_limit: int = field(default=5, metadata={
        "flag": "--share-delivery-limit", "metavar": "N",
        "help": f"the group's delivery count limit, share.delivery.count.limit ({MIN_DELIVERY_LIMIT}.."
                f"{MAX_DELIVERY_LIMIT}): a record delivered that many times is archived"})
