"""The checker of the share workload: what each record's deliveries and acknowledgements say of KIP-932's
guarantees (the kinds and causes in `kchaos.checkers.share.reference`, docs/checkers.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kchaos.checkers.history_scan import read_ops
from kchaos.checkers.share.reference import CAUSES, SHARE_KINDS, check_share_ops

__all__ = ["SHARE", "SHARE_COUNTS", "SHARE_KINDS", "ShareChecker"]

SHARE = "share"  # the checker's name in results.json's `checkers`
SHARE_COUNTS = tuple(SHARE_KINDS)
DEFAULT_LIMIT, DEFAULT_LOCK_MS = 5, 30000  # Kafka's own defaults, for a history without test.json


class ShareChecker:
    """Checks a share run's history: the reference checker over its ops, with the group's delivery count limit
    and acquisition lock from test.json's workload options."""

    def __init__(self, master: str | None = None):
        self.master = master  # no Spark yet: one pass over the ops

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """`check_share_ops` of the history at `history_path`, with `redeliveries` by cause (CAUSES)."""
        options = ((test or {}).get("workload") or {}).get("options") or {}
        result = check_share_ops(read_ops(Path(history_path)), int(options.get("delivery_limit") or DEFAULT_LIMIT),
                                 int(options.get("lock_ms") or DEFAULT_LOCK_MS))
        result["redeliveries"] = {c: int(result["redeliveries"].get(c, 0)) for c in CAUSES}
        return result

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` of each (test, history) pair, in order."""
        return [self.check(t, h) for t, h in runs]
