"""lazyfs on this host: written data lives in the daemon until fsync; a power failure
(SIGKILL + `fusermount3 -u -z` + remount) keeps exactly what was synced. Fixtures: conftest.py.
"""
from __future__ import annotations

import errno
import itertools
import json
import mmap
import os
import random
import threading
import time
from pathlib import Path

import pytest

from lazyfs_mount import PAGE, put


def test_unsynced_data_is_lost_synced_data_survives(fs):
    put(fs / "synced", b"durable" * 1000, sync=True)
    put(fs / "synced", b"volatile tail", off=7000)
    put(fs / "unsynced", b"x" * 10000)
    assert (fs / "synced").read_bytes() == (b"durable" * 1000) + b"volatile tail"
    fs.power_failure()
    assert (fs / "synced").read_bytes() == b"durable" * 1000
    assert (fs / "unsynced").read_bytes() == b""  # the create was metadata: synchronous


def test_partial_page_overwrites_and_appends_match_a_model(fs):
    rng = random.Random(7)
    base = rng.randbytes(3 * PAGE + 123)
    put(fs / "f", base, sync=True)  # so first writes read-modify-write real backing pages
    model = bytearray(base)
    fd = os.open(fs / "f", os.O_RDWR)
    app = os.open(fs / "f", os.O_WRONLY | os.O_APPEND)
    try:
        for i in range(300):
            data = rng.randbytes(rng.choice([1, 7, 100, PAGE - 1, PAGE, PAGE + 1, 3 * PAGE + 5]))
            if i % 3 == 0:
                assert os.write(app, data) == len(data)
                model += data
            else:
                off = rng.randrange(0, len(model) + 2 * PAGE)
                os.pwrite(fd, data, off)
                model[len(model):off] = bytes(max(0, off - len(model)))
                model[off:off + len(data)] = data
            if i % 25 == 0:
                assert os.pread(fd, len(model) + 10, 0) == bytes(model)
                lo = rng.randrange(len(model))
                assert os.pread(fd, 5000, lo) == bytes(model[lo:lo + 5000])
    finally:
        os.close(fd)
        os.close(app)
    assert (fs / "f").read_bytes() == bytes(model)
    assert os.stat(fs / "f").st_size == len(model)


def test_logical_size_shows_before_sync_and_holes_read_as_zeros(fs):
    put(fs / "f", b"a" * 10000)
    put(fs / "f", b"end", off=1 << 20)
    assert os.stat(fs / "f").st_size == (1 << 20) + 3
    assert os.stat(fs.backing / "f").st_size == 0
    data = (fs / "f").read_bytes()
    assert data[:10000] == b"a" * 10000 and data[10000:1 << 20] == bytes((1 << 20) - 10000)
    fd = os.open(fs / "f", os.O_RDONLY)
    try:
        assert os.fstat(fd).st_size == (1 << 20) + 3
        os.fsync(fd)
    finally:
        os.close(fd)
    assert (fs.backing / "f").read_bytes() == data


def test_rename_over_existing_file_moves_its_data(fs):
    put(fs / "target", b"old contents", sync=True)
    put(fs / "tmp1", b"new synced", sync=True)
    os.rename(fs / "tmp1", fs / "target")
    put(fs / "target2", b"old contents 2", sync=True)
    put(fs / "tmp2", b"new but never synced")
    os.rename(fs / "tmp2", fs / "target2")
    assert (fs / "target").read_bytes() == b"new synced"
    assert (fs / "target2").read_bytes() == b"new but never synced"  # dirty data followed the inode
    fs.power_failure()
    assert sorted(os.listdir(fs.mnt)) == ["target", "target2"]
    assert (fs / "target").read_bytes() == b"new synced"
    assert (fs / "target2").read_bytes() == b""  # the rename is durable, the data was not


def test_unlinking_the_last_link_forgets_dirty_data(fs):
    put(fs / "a", b"x" * 3 * PAGE)
    os.link(fs / "a", fs / "b")
    os.unlink(fs / "a")
    assert fs.stats()["dirty_bytes"] == 3 * PAGE  # still reachable as b
    assert (fs / "b").read_bytes() == b"x" * 3 * PAGE
    os.unlink(fs / "b")
    assert fs.stats()["dirty_bytes"] == 0


def test_restart_right_after_sigkill_detaches_the_dead_mount(fs):
    put(fs / "f", b"synced", sync=True)
    fs.crash()
    fs.start()  # no fusermount3 in between: lazyfs detaches the dead mount itself
    assert (fs / "f").read_bytes() == b"synced"


def test_truncate_and_ftruncate_behave_like_a_filesystem(fs):
    rng = random.Random(3)
    synced = rng.randbytes(3 * PAGE)
    put(fs / "f", synced, sync=True)
    dirty = rng.randbytes(4 * PAGE)
    put(fs / "f", dirty, off=2 * PAGE)  # dirty pages 2..5
    model = bytearray(synced[:2 * PAGE] + dirty)
    fd = os.open(fs / "f", os.O_RDWR)
    try:
        for size, by_path in [(2 * PAGE + 100, False), (8 * PAGE, False), (PAGE + 1, True),
                              (5 * PAGE + 7, True), (0, False), (3, True)]:
            if by_path:
                os.truncate(fs / "f", size)
            else:
                os.ftruncate(fd, size)
            model[size:] = b""
            model += bytes(size - len(model))
            assert os.fstat(fd).st_size == size
            assert os.stat(fs.backing / "f").st_size == size  # truncate is synchronous
            assert os.pread(fd, 10 * PAGE, 0) == bytes(model)
            os.pwrite(fd, b"Z" * 10, size // 2)  # leave some dirty data behind each time
            model[size // 2:size // 2 + 10] = b"Z" * 10
        os.fsync(fd)
    finally:
        os.close(fd)
    fs.power_failure()
    assert (fs / "f").read_bytes() == bytes(model)


def test_directory_fsync(fs):
    os.mkdir(fs / "d")
    put(fs / "d" / "f", b"x", sync=True)
    fd = os.open(fs / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fs.power_failure()
    assert (fs / "d" / "f").read_bytes() == b"x"


def test_shared_writable_mmap_of_a_preallocated_file(fs):
    size = 1 << 20
    marks = {0: b"first", 4090: b"straddles-a-page", 777_777: b"deep", size - 4: b"last"}

    def write_through_map(path: Path, stamp: bytes) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, size)  # what RandomAccessFile.setLength does for Kafka's index files
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as m:
            for off, data in marks.items():
                m[off:off + len(data)] = stamp[:1] + data[1:]
        return fd

    fd = write_through_map(fs / "idx", b"A")
    for off, data in marks.items():
        assert os.pread(fd, len(data), off) == b"A" + data[1:]
    os.close(fd)  # close writes the kernel's dirty map pages back to lazyfs: dirty there
    assert fs.stats()["dirty_bytes"] >= 4 * PAGE
    assert (fs.backing / "idx").read_bytes() == bytes(size)
    fs.power_failure()
    assert (fs / "idx").read_bytes() == bytes(size)  # the preallocation survived, the map writes did not

    fd = write_through_map(fs / "idx", b"B")
    os.fsync(fd)  # writes the map's dirty pages, then syncs
    os.close(fd)
    fs.power_failure()
    data = (fs / "idx").read_bytes()
    assert len(data) == size
    for off, mark in marks.items():
        assert data[off:off + len(mark)] == b"B" + mark[1:]


def test_clear_drops_unsynced_data_without_restart(fs):
    put(fs / "f", b"kept", sync=True)
    put(fs / "f", b"-and-lost", off=4)
    put(fs / "g", b"lost" * 5000)
    s = fs.stats()
    assert s["dirty_files"] == 2
    fs.command("clear")
    s = fs.stats()
    assert s["dirty_bytes"] == 0 and s["dropped_bytes"] >= 3 * PAGE
    # (opening a file drops its kernel page cache: no stale data is served)
    assert (fs / "f").read_bytes() == b"kept"
    assert (fs / "g").read_bytes() == b""


def test_delay_slows_writes(fs):
    fd = os.open(fs / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fs.command("delay 50 0")
        assert fs.stats()["write_delay_ms"] == 50
        t = time.monotonic()
        for _ in range(20):
            os.write(fd, b"x" * 100)
        assert time.monotonic() - t >= 0.9
        fs.command("delay 0 0")
        fs.stats()
        t = time.monotonic()
        for _ in range(20):
            os.write(fd, b"x" * 100)
        assert time.monotonic() - t < 0.5
    finally:
        os.close(fd)


def test_stats_count_dirty_and_synced_bytes(fs):
    put(fs / "a", b"a" * 10 * PAGE)
    put(fs / "b", b"bbb")
    s = fs.stats()
    assert (s["dirty_bytes"], s["dirty_files"], s["synced_bytes"]) == (11 * PAGE, 2, 0)
    assert s["writes"] >= 2 and s["pid"] == fs.proc.pid
    put(fs / "a", b"", sync=True)
    s = fs.stats()
    assert (s["dirty_bytes"], s["dirty_files"], s["synced_bytes"]) == (PAGE, 1, 10 * PAGE)
    assert s["fsyncs"] >= 1
    fs.command("flush")
    s = fs.stats()
    assert (s["dirty_bytes"], s["synced_bytes"]) == (0, 10 * PAGE + 3)
    assert (fs.backing / "b").read_bytes() == b"bbb"


def test_writeback_age_writes_old_dirty_data_through(mount):
    fs = mount("--writeback-age", "1")
    t = time.monotonic()
    put(fs / "f", b"eventually" * 100)
    assert (fs.backing / "f").read_bytes() == b""
    while (fs.backing / "f").read_bytes() != b"eventually" * 100:
        assert time.monotonic() - t < 5, "not written back within 5 s"
        time.sleep(0.05)
    assert time.monotonic() - t >= 0.5
    fs.power_failure()
    assert (fs / "f").read_bytes() == b"eventually" * 100


def test_writeback_waits_for_the_flusher_as_the_kernel_does(mount):
    # vm.dirty_writeback_centisecs: the flusher wakes every interval and writes back what is older than the
    # age, so a write is on disk between the age and the age plus one interval after it was made
    fs = mount("--writeback-age", "0.5", "--writeback-interval", "2")

    def written_back(name: str, data: bytes) -> float:
        t = time.monotonic()
        put(fs / name, data)
        while (fs.backing / name).read_bytes() != data:
            assert time.monotonic() - t < 6, f"{name} not written back within 6 s"
            time.sleep(0.02)
        return time.monotonic() - t

    written_back("first", b"1" * 100)  # now just after one of the flusher's wake-ups
    waited = written_back("second", b"2" * 100)
    assert 1.5 <= waited <= 3.0, f"written back {waited:.2f} s after the write, not at the next wake-up (2 s)"


_reports = itertools.count()


def report(fs, command: str = "stats") -> dict:
    """`stats` or `powerfail` into a file of its own; the JSON it wrote."""
    out = fs.ctl.parent / f"{command}-{next(_reports)}.json"
    fs.command(f"{command} {out}")
    deadline = time.monotonic() + 5
    while not out.exists():
        assert time.monotonic() < deadline, f"no {command} report from lazyfs"
        time.sleep(0.005)
    return json.loads(out.read_text())


def files(s: dict) -> dict:
    return {f["path"]: f for f in s["files"]}


def test_stats_name_each_dirty_file_with_its_ranges(fs):
    os.mkdir(fs / "d")
    put(fs / "d" / "seg.log", b"a" * 100)
    put(fs / "two", b"x" * 100)
    put(fs / "two", b"y" * 100, off=3 * PAGE + 10)  # pages 0 and 3: two ranges
    put(fs / "adj", b"z" * PAGE)
    put(fs / "adj", b"z" * 10, off=PAGE)  # the next page: one range
    put(fs / "synced", b"s" * 100, sync=True)
    put(fs / "many", b"m", off=200 * PAGE)
    for i in range(0, 140, 2):  # 70 pages apart: 71 ranges
        put(fs / "many", b"m", off=i * PAGE)
    weird = os.path.join(os.fsencode(fs.mnt), b'we"ird\\na\nme\xff')
    put(weird, b"w")
    fd = os.open(fs / "unlinked", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"u" * 100)
        os.unlink(fs / "unlinked")  # its data is forgotten: not listed
        s = report(fs)
    finally:
        os.close(fd)
    by = files(s)
    assert [f["path"] for f in s["files"]] == sorted(by) == ["adj", "d/seg.log", "many", "two", 'we"ird\\na\nme\ufffd']
    assert (by["d/seg.log"]["dirty_bytes"], by["d/seg.log"]["size"], by["d/seg.log"]["ranges"]) == (PAGE, 100, [[0, 100]])
    assert by["two"]["dirty_bytes"] == 2 * PAGE and by["two"]["size"] == 3 * PAGE + 110
    assert by["two"]["ranges"] == [[0, PAGE], [3 * PAGE, 3 * PAGE + 110]]
    assert by["adj"]["ranges"] == [[0, PAGE + 10]] and by["adj"]["dirty_bytes"] == 2 * PAGE
    assert by["many"]["dirty_bytes"] == 71 * PAGE and by["many"]["ranges_cut"] is True
    assert by["many"]["ranges"] == [[i * PAGE, (i + 1) * PAGE] for i in range(0, 128, 2)]
    assert "ranges_cut" not in by["two"]
    assert s["dirty_files"] == len(s["files"]) == 5
    os.rename(fs / "two", fs / "d" / "moved")  # the data follows the inode, and so does its name
    assert "d/moved" in files(report(fs)) and "two" not in files(report(fs))
    fs.command("flush")
    s = report(fs)
    assert (s["files"], s["oldest_age_ms"], s["dirty_bytes"]) == ([], None, 0)


def test_stats_age_each_file_by_its_oldest_dirty_page(fs):
    t0 = time.time() * 1000
    put(fs / "old", b"o" * 100)
    t1 = time.time() * 1000
    time.sleep(1.0)
    put(fs / "old", b"o" * 100, off=5 * PAGE)  # a younger page does not make the file younger
    t2 = time.time() * 1000
    put(fs / "young", b"y" * 100)
    t3 = time.time() * 1000
    s = report(fs)
    by = files(s)
    assert t3 - 5 <= s["at_unix_ms"] <= time.time() * 1000 + 5
    assert by["old"]["oldest_age_ms"] >= 1000 and by["young"]["oldest_age_ms"] < 1000
    assert s["oldest_age_ms"] == by["old"]["oldest_age_ms"]
    for f in s["files"]:
        assert f["oldest_unix_ms"] == s["at_unix_ms"] - f["oldest_age_ms"]
    assert t0 - 5 <= by["old"]["oldest_unix_ms"] <= t1 + 5  # (ms on both clocks, each rounded down)
    assert t2 - 5 <= by["young"]["oldest_unix_ms"] <= t3 + 5
    put(fs / "old", b"o" * 100, off=5 * PAGE, sync=True)  # nothing dirty left in it
    t4 = time.time() * 1000
    put(fs / "old", b"o" * 100, off=5 * PAGE)
    assert files(report(fs))["old"]["oldest_unix_ms"] >= t4 - 5


def test_powerfail_reports_exactly_what_is_lost_after_writeback(mount):
    fs = mount("--writeback-age", "1")
    put(fs / "old", b"written back" * 100)
    time.sleep(2.5)
    put(fs / "new", b"lost" * 100)
    s = report(fs, "powerfail")
    assert list(files(s)) == ["new"] and s["dirty_files"] == 1
    assert files(s)["new"]["ranges"] == [[0, 400]] and s["oldest_age_ms"] < 1000
    fs.power_failure()
    assert (fs / "old").read_bytes() == b"written back" * 100
    assert (fs / "new").read_bytes() == b""


def test_powerfail_freezes_writeback_flush_writes_and_fsyncs(mount):
    fs = mount("--writeback-age", "1")
    put(fs / "f", b"never written back" * 100)
    s = report(fs, "powerfail")
    assert list(files(s)) == ["f"]
    time.sleep(2.0)  # the age is long past: writeback would have written it by now
    fs.command("flush")
    assert list(files(report(fs))) == ["f"]  # (also a barrier for the flush)
    assert (fs.backing / "f").read_bytes() == b""
    fd = os.open(fs / "f", os.O_RDWR)
    try:
        with pytest.raises(OSError) as e:
            os.pwrite(fd, b"too late", 0)
        assert e.value.errno == errno.EIO
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert files(report(fs))["f"]["ranges"] == files(s)["f"]["ranges"]  # the write failed whole
    fs.power_failure()
    assert (fs / "f").read_bytes() == b""


def test_powerfail_during_writeback_lists_exactly_the_lost_pages(mount):
    """Pages not listed hold what was written last; listed ones lost it (random bytes: no coincidence)."""
    fs = mount("--writeback-age", "0.2")
    n = 256
    model = bytearray(random.Random(1).randbytes(n * PAGE))
    put(fs / "f", bytes(model), sync=True)
    stop, wrote = threading.Event(), threading.Event()

    def writer() -> None:
        rng = random.Random(2)
        fd = os.open(fs / "f", os.O_RDWR)
        try:
            while not stop.is_set():
                off, data = rng.randrange(n * PAGE - 200), rng.randbytes(rng.randrange(16, 200))
                try:
                    os.pwrite(fd, data, off)
                except OSError as e:
                    assert e.errno == errno.EIO  # frozen
                    return
                model[off:off + len(data)] = data
                wrote.set()
                time.sleep(0.005)  # slow enough that a writeback leaves pages clean till the next
        finally:
            os.close(fd)

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(1.0)  # several writebacks meanwhile
        # Power fails right after a write, well inside the 0.2 s writeback age: on a loaded machine the writer
        # can be starved long enough for every page to be written back, and the test would check nothing.
        wrote.clear()
        assert wrote.wait(10)
        s = report(fs, "powerfail")
    finally:
        stop.set()
        t.join()
    ranges = files(s)["f"]["ranges"] if "f" in files(s) else []
    listed = {p for a, b in ranges for p in range(a // PAGE, (b + PAGE - 1) // PAGE)}
    assert 0 < len(listed) < n
    fs.power_failure()
    data = (fs / "f").read_bytes()
    for p in range(n):
        page, want = data[p * PAGE:(p + 1) * PAGE], bytes(model[p * PAGE:(p + 1) * PAGE])
        assert (page != want) == (p in listed), f"page {p}"


def test_dirty_age_after_a_flush_and_a_truncate(mount):
    fs = mount("--writeback-age", "1")
    put(fs / "f", b"first" * 100)
    t = time.monotonic()
    while (fs.backing / "f").read_bytes() != b"first" * 100:
        assert time.monotonic() - t < 5, "not written back within 5 s"
        time.sleep(0.02)
    time.sleep(0.6)
    t = time.time() * 1000
    put(fs / "f", b"second")
    assert files(report(fs))["f"]["oldest_unix_ms"] >= t - 5  # from this write, not the first or the writeback

    put(fs / "g", b"old", off=5 * PAGE)
    time.sleep(0.6)
    t = time.time() * 1000
    put(fs / "g", b"young")
    assert files(report(fs))["g"]["oldest_age_ms"] >= 600
    os.truncate(fs / "g", PAGE)  # drops the old page: the file is as young as what is left
    assert files(report(fs))["g"]["oldest_unix_ms"] >= t - 5


def test_pages_kept_by_a_flush_are_dirty_from_the_flush_on(fs):
    """A page rewritten while `flush` wrote it back stays dirty, but its old bytes are on disk: it
    must not count as dirty since before the flush (older writes would look lost). (fsync cannot
    show this: the kernel holds the inode lock across it, so no write to the file comes in.)"""
    stop = threading.Event()
    fd = os.open(fs / "f", os.O_RDWR | os.O_CREAT, 0o644)

    def writer() -> None:
        rng = random.Random(3)
        while not stop.is_set():
            os.pwrite(fd, rng.randbytes(64), rng.randrange(16) * PAGE)

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(200):
            before = time.time() * 1000
            fs.command("flush")
            f = files(report(fs)).get("f")  # commands run in order: the flush is over
            assert f is None or f["oldest_unix_ms"] >= before - 3, (f, before)
    finally:
        stop.set()
        t.join()
        os.close(fd)
