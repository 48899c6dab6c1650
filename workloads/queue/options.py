"""The queue workload's own options: test.json's `workload.options` for `--workload queue`."""
from __future__ import annotations

from dataclasses import dataclass, field

GROUP_COMMITS = ("sync", "auto")


@dataclass(frozen=True)
class QueueOptions:
    """How subscribed consumers (`--consumer-mode subscribe`) commit. Each field's metadata is its `kchaos run`
    option: `flag`, `help`, `metavar`."""

    group_commit: str = field(default="sync", metadata={
        "flag": "--group-commit", "metavar": "{sync,auto}",
        "help": "with --consumer-mode subscribe, commit synchronously after each poll is recorded (sync), or let "
                "the client commit in the background (auto)"})
