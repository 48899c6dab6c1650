"""Benchmark: merging producer send streams into history.jsonl, lines per second and peak memory.

    python bench/merge_streams.py [EVENTS ...]      (default: 2000000 8000000)

For each size, writes two send streams (core/send_stream.py, as two producer worker
processes would: every send an invoke and an ok event, half the events each) plus a short
history.jsonl, then runs `merge_streams` in a fresh interpreter and prints its wall time,
merged lines per second, and that interpreter's peak resident memory (ru_maxrss). Flat memory
means the peak does not grow with the size.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from kchaos.core.send_stream import merge_streams
t = time.perf_counter()
n = merge_streams(sys.argv[1])
print(json.dumps({"lines": n, "s": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_run(run: Path, events: int) -> None:
    """Two streams of `events` // 2 events each (sends completed ok) and a three-line history.jsonl."""
    from kchaos.core.send_stream import PARTS_DIR, SendStream

    (run / PARTS_DIR).mkdir(parents=True)
    t0 = time.monotonic_ns()
    for k in range(2):
        stream = SendStream(run / PARTS_DIR / f"producers-{k}.arrows", topic="t", t0_ns=t0)
        for i in range(events // 4):
            value = 2 * i + k + 1
            stream.sent(k, k, i % 3, value)
            stream.done(k, k, i % 3, value, "ok", i, None)
            if i % 100_000 == 0:
                stream.flush()
        stream.close()
    lines = [{"index": i, "time": 0, "process": "nemesis", "type": "info", "f": "start", "nemesis": "none"}
             for i in range(3)]
    (run / "history.jsonl").write_text("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines))


def main(sizes: list[int]) -> None:
    """Run the benchmark for each size (events in the streams)."""
    print(f"{'events':>11} {'merge s':>8} {'lines/s':>10} {'peak RSS MB':>12}")
    for events in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp)
            write_run(run, events)
            out = subprocess.run([sys.executable, "-c", CHILD, str(run)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{r['lines']:>11,} {r['s']:>8.1f} {r['lines'] / r['s']:>10,.0f} {r['rss_mb']:>12.0f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2_000_000, 8_000_000])
