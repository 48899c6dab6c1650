"""The queue workload's own options: test.json's `workload.options` for `--workload queue`."""
from __future__ import annotations

from dataclasses import dataclass, field

GROUP_COMMITS = ("sync", "auto")


@dataclass(frozen=True)
class QueueOptions:
    """How subscribed consumers (`--consumer-mode subscribe`) commit: after each poll is recorded (sync), or in
    the background (auto). Each field's `flag` is its `kchaos run` option."""

    group_commit: str = field(default="sync", metadata={"flag": "--group-commit"})
