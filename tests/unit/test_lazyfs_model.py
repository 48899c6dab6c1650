"""lazyfs under concurrent appenders and readers, and against a model of random write/truncate/fsync
sequences: reads match the model, and a power failure leaves the state of the last fsync."""
from __future__ import annotations

import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lazyfs_mount import PAGE, put


def _records(writer: int) -> list[bytes]:
    rng = random.Random(writer)
    bodies = (rng.randbytes(rng.randrange(0, 3000)) for _ in range(2000))
    return [f"{writer}:{seq}:{len(b)}:".encode().ljust(24, b".") + b for seq, b in enumerate(bodies)]


def _check_records(data: bytes, writer: int) -> int:
    """The number of complete records at the start of `data`; fails on a malformed one."""
    pos = seq = 0
    while pos + 24 <= len(data):
        w, s, n, _ = data[pos:pos + 24].split(b":", 3)
        assert (int(w), int(s)) == (writer, seq)
        pos, seq = pos + 24 + int(n), seq + (pos + 24 + int(n) <= len(data))
    return seq


def test_concurrent_appenders_and_readers_then_power_failure(fs):
    done = threading.Event()

    def write(w: int) -> bytes:
        recs = _records(w)
        fd = os.open(fs / f"log{w}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for rec in recs:
                assert os.write(fd, rec) == len(rec)
            os.fsync(fd)
        finally:
            os.close(fd)
        return b"".join(recs)

    def read() -> None:  # every prefix a reader sees must be well-formed
        while not done.is_set():
            for w in range(4):
                if (fs / f"log{w}").exists():
                    _check_records((fs / f"log{w}").read_bytes(), w)

    with ThreadPoolExecutor(6) as pool:
        readers = [pool.submit(read) for _ in range(2)]
        expected = list(pool.map(write, range(4)))
        done.set()
        for r in readers:
            r.result()
    fs.power_failure()
    for w in range(4):
        data = (fs / f"log{w}").read_bytes()
        assert data == expected[w] and _check_records(data, w) == 2000


# A random mix of writes, truncates and fsyncs on one file, checked against a model of
# two byte strings: `volatile` (what reads must return) and `durable` (what survives a
# power failure). Writes change only `volatile`; fsync copies it to `durable`. Truncate is
# metadata, synchronous in lazyfs: it resizes both (a shrink cuts the durable bytes too,
# a grow adds durable zeros), so the durable state is "the data as of the last fsync, with
# every later truncate applied".
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 3 * PAGE), st.integers(1, PAGE + 10)),
        st.tuples(st.just("truncate"), st.integers(0, 4 * PAGE), st.just(0)),
        st.tuples(st.just("fsync"), st.just(0), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, seed=st.integers(0, 2**16))
def test_random_ops_match_model_and_power_failure_keeps_last_fsync(shared_fs, ops, seed):
    fs, rng = shared_fs, random.Random(seed)
    name = f"prop-{seed}-{time.monotonic_ns()}"
    base = rng.randbytes(rng.randrange(0, 3 * PAGE))  # synced first: partial writes must merge with it
    put(fs / name, base, sync=True)
    volatile, durable = bytearray(base), bytearray(base)
    fd = os.open(fs / name, os.O_RDWR)
    try:
        for op, a, b in ops:
            if op == "write":
                data = rng.randbytes(b)
                os.pwrite(fd, data, a)
                volatile += bytes(max(0, a - len(volatile)))
                volatile[a:a + b] = data
            elif op == "truncate":
                os.ftruncate(fd, a)
                for m in (volatile, durable):
                    m[a:] = b""
                    m += bytes(a - len(m))
            else:
                os.fsync(fd)
                durable[:] = volatile
        assert os.fstat(fd).st_size == len(volatile)
        assert os.pread(fd, len(volatile) + 1, 0) == bytes(volatile)
    finally:
        os.close(fd)
    fs.power_failure()
    assert (fs / name).read_bytes() == bytes(durable)
