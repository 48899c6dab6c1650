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

from kchaos.nemesis.powerfail import torn_prefix


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
        assert fs.stats()["write_delay_ms"] == 50 and fs.stats()["delayed_ms"] == 0
        t = time.monotonic()
        for _ in range(20):
            os.write(fd, b"x" * 100)
        assert time.monotonic() - t >= 0.9  # a sleep is never shorter, however fast the machine
        assert fs.stats()["delayed_ms"] == 20 * 50
        fs.command("delay 0 0")
        assert fs.stats()["write_delay_ms"] == 0
        for _ in range(20):
            os.write(fd, b"x" * 100)
        assert fs.stats()["delayed_ms"] == 20 * 50  # no write slept again, however slow the machine
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
    fs = mount("--manual-clock", "--writeback-age", "1")  # the flusher wakes every 250 ms
    put(fs / "f", b"eventually" * 100)
    fs.advance(999)
    assert (fs.backing / "f").read_bytes() == b""
    fs.advance(1)
    assert (fs.backing / "f").read_bytes() == b"eventually" * 100
    fs.power_failure()
    assert (fs / "f").read_bytes() == b"eventually" * 100


def test_writeback_waits_for_the_flusher_as_the_kernel_does(mount):
    # vm.dirty_writeback_centisecs: the flusher wakes every interval and writes back what is older than the
    # age, so a write is on disk between the age and the age plus one interval after it was made
    fs = mount("--manual-clock", "--writeback-age", "0.5", "--writeback-interval", "2")
    put(fs / "first", b"1" * 100)
    fs.advance(1999)  # long past the age, but the flusher has not woken yet
    assert (fs.backing / "first").read_bytes() == b""
    fs.advance(1)  # its first wake-up, 2 s after the start
    assert (fs.backing / "first").read_bytes() == b"1" * 100
    put(fs / "second", b"2" * 100)  # just after a wake-up: it waits for the next, not for the age
    fs.advance(1999)
    assert (fs.backing / "second").read_bytes() == b""
    fs.advance(1)
    assert (fs.backing / "second").read_bytes() == b"2" * 100


def test_the_real_clock_is_the_default(mount):
    """Without --manual-clock, writeback comes by itself and `advance` moves nothing. (Only lower bounds on
    time: a slow machine makes things later, never earlier.)"""
    fs = mount("--writeback-age", "0.2")
    t = time.monotonic()
    put(fs / "f", b"by itself" * 100)
    while (fs.backing / "f").read_bytes() != b"by itself" * 100:
        assert time.monotonic() - t < 30, "not written back within 30 s"
        time.sleep(0.01)
    assert time.monotonic() - t >= 0.19  # (lazyfs reads the clock after us, and rounds ms down)
    fs = mount()
    put(fs / "g", b"young")
    before = time.time() * 1000
    fs.command("advance 3600000")
    s = report(fs)
    assert before - 1 <= s["at_unix_ms"] <= time.time() * 1000 and s["oldest_age_ms"] < 3_600_000


_reports = itertools.count()


def report(fs, command: str = "stats", *args: str) -> dict:
    """`stats` or `powerfail` (with `args` after the file, as `torn SEED`) into a file of its own; the JSON it
    wrote."""
    out = fs.ctl.parent / f"{command}-{next(_reports)}.json"
    fs.command(" ".join((command, str(out), *args)))
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
    assert ((by["d/seg.log"]["dirty_bytes"], by["d/seg.log"]["size"], by["d/seg.log"]["ranges"])
            == (PAGE, 100, [[0, 100]]))
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


def test_stats_age_each_file_by_its_oldest_dirty_page(mount):
    t0 = time.time() * 1000
    fs = mount("--manual-clock")
    start = report(fs)["at_unix_ms"]
    assert t0 - 1 <= start <= time.time() * 1000  # the manual clock starts at the real time
    put(fs / "old", b"o" * 100)
    fs.advance(1000)
    put(fs / "old", b"o" * 100, off=5 * PAGE)  # a younger page does not make the file younger
    put(fs / "young", b"y" * 100)
    s = report(fs)
    by = files(s)
    assert s["at_unix_ms"] == start + 1000
    assert (by["old"]["oldest_age_ms"], by["young"]["oldest_age_ms"], s["oldest_age_ms"]) == (1000, 0, 1000)
    for f in s["files"]:
        assert f["oldest_unix_ms"] == s["at_unix_ms"] - f["oldest_age_ms"]
    assert (by["old"]["oldest_unix_ms"], by["young"]["oldest_unix_ms"]) == (start, start + 1000)
    put(fs / "old", b"o" * 100, off=5 * PAGE, sync=True)  # nothing dirty left in it
    fs.advance(500)
    put(fs / "old", b"o" * 100, off=5 * PAGE)
    assert files(report(fs))["old"]["oldest_unix_ms"] == start + 1500


def test_powerfail_reports_exactly_what_is_lost_after_writeback(mount):
    fs = mount("--manual-clock", "--writeback-age", "1")
    put(fs / "old", b"written back" * 100)
    fs.advance(1000)
    put(fs / "new", b"lost" * 100)
    fs.advance(300)
    s = report(fs, "powerfail")
    assert list(files(s)) == ["new"] and s["dirty_files"] == 1
    assert files(s)["new"]["ranges"] == [[0, 400]] and s["oldest_age_ms"] == 300
    fs.power_failure()
    assert (fs / "old").read_bytes() == b"written back" * 100
    assert (fs / "new").read_bytes() == b""


def test_powerfail_freezes_writeback_flush_writes_and_fsyncs(mount):
    fs = mount("--manual-clock", "--writeback-age", "1")
    put(fs / "f", b"never written back" * 100)
    s = report(fs, "powerfail")
    assert list(files(s)) == ["f"]
    fs.advance(2000)  # the age is long past: the flusher's passes at 1 s and after would have written it
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
    """Pages not listed hold what was written last; listed ones lost it (random bytes: no coincidence).

    Writes and steps of the clock interleave at random, so writebacks come and go between the writes, and the
    power fails right after a write. A model of the flusher (it wakes every 50 ms and writes the file back whole
    once its oldest dirty page is 200 ms old) says what the backing file holds after each step and which pages
    are dirty at the end."""
    fs = mount("--manual-clock", "--writeback-age", "0.2")
    n, age, every = 256, 200, 50
    model = bytearray(random.Random(1).randbytes(n * PAGE))
    put(fs / "f", bytes(model), sync=True)
    durable, dirty = bytearray(model), set()
    rng, now, wake, dirty_since, writebacks = random.Random(2), 0, every, 0, 0

    def write() -> None:
        nonlocal dirty_since
        off, data = rng.randrange(n * PAGE - 200), rng.randbytes(rng.randrange(16, 200))
        assert os.pwrite(fd, data, off) == len(data)
        model[off:off + len(data)] = data
        dirty_since = dirty_since if dirty else now
        dirty.update(range(off // PAGE, (off + len(data) - 1) // PAGE + 1))

    fd = os.open(fs / "f", os.O_RDWR)
    try:
        for _ in range(60):
            for _ in range(rng.randrange(1, 6)):
                write()
            step = rng.randrange(120)
            fs.advance(step)
            while wake <= now + step:  # the flusher's wake-ups in this step
                if dirty and wake - dirty_since >= age:
                    durable[:], writebacks = model, writebacks + 1
                    dirty.clear()
                wake += every
            now += step
            backing = (fs.backing / "f").read_bytes()
            assert [p for p in range(n) if backing[p * PAGE:(p + 1) * PAGE] != durable[p * PAGE:(p + 1) * PAGE]] == []
        write()
        s = report(fs, "powerfail")
    finally:
        os.close(fd)
    assert writebacks >= 10 and 0 < len(dirty) < n  # the seeds make it so: the test checks something
    ranges = files(s)["f"]["ranges"] if "f" in files(s) else []
    listed = {p for a, b in ranges for p in range(a // PAGE, (b + PAGE - 1) // PAGE)}
    assert listed == dirty and files(s)["f"]["dirty_bytes"] == len(dirty) * PAGE
    fs.power_failure()
    data = (fs / "f").read_bytes()
    assert data == durable
    for p in range(n):
        page, want = data[p * PAGE:(p + 1) * PAGE], bytes(model[p * PAGE:(p + 1) * PAGE])
        assert (page != want) == (p in listed), f"page {p}"


def test_dirty_age_after_a_flush_and_a_truncate(mount):
    fs = mount("--manual-clock", "--writeback-age", "1")
    start = report(fs)["at_unix_ms"]
    put(fs / "f", b"first" * 100)
    fs.advance(1000)
    assert (fs.backing / "f").read_bytes() == b"first" * 100
    fs.advance(600)
    put(fs / "f", b"second")
    assert files(report(fs))["f"]["oldest_unix_ms"] == start + 1600  # from this write, not the first or the writeback

    put(fs / "g", b"old", off=5 * PAGE)
    fs.advance(600)
    put(fs / "g", b"young")
    assert files(report(fs))["g"]["oldest_age_ms"] == 600
    os.truncate(fs / "g", PAGE)  # drops the old page: the file is as young as what is left
    assert files(report(fs))["g"]["oldest_unix_ms"] == start + 2200


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


# ---- a full disk: `limit`, `full` ----

def write_all(fd: int, data: bytes) -> int:
    """os.write until ENOSPC or done; how many bytes went in."""
    done = 0
    while done < len(data):
        try:
            done += os.write(fd, data[done:])
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            break
    return done


def test_a_full_disk_refuses_growth_with_enospc_until_the_limit_is_lifted(fs):
    put(fs / "old", b"o" * 1000, sync=True)
    put(fs / "spare", b"s" * 2000, sync=True)
    assert fs.stats()["used_bytes"] == 3000 and fs.stats()["limit_bytes"] is None
    fs.command("full 5000")  # 5000 bytes more, then the disk is full
    s = fs.stats()  # (also a barrier)
    assert (s["used_bytes"], s["limit_bytes"], s["enospc"]) == (3000, 8000, 0)
    fd = os.open(fs / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)  # creating a file takes no room
    try:
        assert os.write(fd, b"a" * 4000) == 4000
        assert os.write(fd, b"b" * 3000) == 1000  # cut short at the limit, as a real disk does
        with pytest.raises(OSError) as e:
            os.write(fd, b"c")
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as e:  # growing by truncate or fallocate is refused too
            os.ftruncate(fd, 10 * PAGE)
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as e:
            os.posix_fallocate(fd, 0, 5001)
        assert e.value.errno == errno.ENOSPC
        put(fs / "old", b"rewrite")  # overwriting in place needs no room
        v = os.statvfs(fs.mnt)
        assert v.f_bavail == 0 and v.f_blocks * v.f_frsize <= 8000  # df says full too
        s = fs.stats()
        assert (s["used_bytes"], s["enospc"]) == (8000, 3)
        os.unlink(fs / "spare")  # frees its 2000 bytes
        assert write_all(fd, b"d" * 3000) == 2000
        fs.command("limit off")
        fs.stats()  # (a barrier: the command is done)
        assert os.write(fd, b"e" * 100_000) == 100_000
    finally:
        os.close(fd)
    assert (fs / "log").read_bytes() == b"a" * 4000 + b"b" * 1000 + b"d" * 2000 + b"e" * 100_000
    s = fs.stats()
    assert (s["used_bytes"], s["limit_bytes"]) == (1000 + 107_000, None)
    fs.command("limit 0")  # an absolute limit below the usage: nothing may grow
    fs.stats()
    with pytest.raises(OSError) as e:
        put(fs / "new", b"x")
    assert e.value.errno == errno.ENOSPC


def apparent_size(root: Path) -> int:
    """`du --apparent-size --bytes` of the regular files, each inode once."""
    seen, total = set(), 0
    for d, _, names in os.walk(root):
        for n in names:
            st = os.lstat(os.path.join(d, n))
            if os.path.isfile(os.path.join(d, n)) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def test_used_bytes_follow_every_size_change_and_survive_a_restart(fs):
    def check(extra: int = 0) -> None:
        assert fs.stats()["used_bytes"] == apparent_size(fs.mnt) + extra

    os.mkdir(fs / "d")
    put(fs / "d" / "a", b"a" * 10_000)
    put(fs / "b", b"b" * 100, off=3 * PAGE, sync=True)  # a hole counts: apparent size
    check()
    os.truncate(fs / "b", 1 << 20)  # sparse, as Kafka's index files
    os.truncate(fs / "d" / "a", 10)
    check()
    os.link(fs / "b", fs / "b2")  # one inode, counted once
    os.unlink(fs / "b")
    check()
    put(fs / "tmp", b"t" * 5000)
    os.rename(fs / "tmp", fs / "d" / "a")  # the old file goes
    check()
    fd = os.open(fs / "d" / "a", os.O_RDWR)
    try:
        os.unlink(fs / "d" / "a")  # open: its space is held until the last handle goes
        check(extra=5000)
        os.write(fd, b"more" * 100)
        check(extra=5000)
    finally:
        os.close(fd)
    # The kernel sends FUSE's RELEASE after close() has returned, so the space comes back a moment later.
    deadline = time.monotonic() + 5
    while fs.stats()["used_bytes"] != apparent_size(fs.mnt) and time.monotonic() < deadline:
        time.sleep(0.01)
    check()
    put(fs / "dirty", b"x" * 3 * PAGE)
    fs.command("clear")  # unsynced growth is gone: the file is as long as its synced part
    check()
    before = fs.stats()["used_bytes"]
    fs.power_failure()
    assert fs.stats()["used_bytes"] == before == apparent_size(fs.mnt)


# ---- a torn last write: `powerfail PATH torn SEED` ----

def powerfail_torn(fs, seed: int) -> dict:
    return report(fs, "powerfail", "torn", str(seed))


def test_a_torn_power_failure_keeps_exactly_the_seeded_prefix_of_each_last_write(fs):
    """Everything unsynced reaches the disk but the tail of each file's last write. (A write that starts
    inside a page the kernel has not cached reaches lazyfs as two, split at the page's end: the last
    write is the last one lazyfs got, so these writes start on page boundaries.)"""
    rng = random.Random(5)
    synced, w1, w2 = rng.randbytes(5000), rng.randbytes(2 * PAGE - 5000), rng.randbytes(6000)
    put(fs / "log", synced, sync=True)
    put(fs / "log", w1, off=5000)  # unsynced, not the last write: it reaches the disk
    put(fs / "log", w2, off=2 * PAGE)  # the last write: torn
    base, early, over = rng.randbytes(20_000), rng.randbytes(100), rng.randbytes(3000)
    os.mkdir(fs / "d")
    put(fs / "d" / "idx", base, sync=True)
    put(fs / "d" / "idx", early, off=9000)
    put(fs / "d" / "idx", over, off=PAGE)  # the last write overwrites synced bytes: the torn ones stay old
    put(fs / "gone", b"g" * 100, sync=True)
    put(fs / "gone", b"h" * 100, off=100)
    os.truncate(fs / "gone", 150)  # no last write left to tear: it loses its unsynced data, as in a plain failure
    assert sorted(files(report(fs))) == ["d/idx", "gone", "log"]

    s = powerfail_torn(fs, 1234)
    k_log, k_idx = torn_prefix(1234, "log", 6000), torn_prefix(1234, "d/idx", 3000)
    by = files(s)
    assert by["log"]["torn"] == {"offset": 2 * PAGE, "length": 6000, "kept": k_log}
    assert by["log"]["ranges"] == [[2 * PAGE + k_log, 2 * PAGE + 6000]]
    assert by["d/idx"]["torn"] == {"offset": PAGE, "length": 3000, "kept": k_idx}
    assert by["d/idx"]["ranges"] == [[PAGE + k_idx, PAGE + 3000]]
    assert "torn" not in by["gone"] and by["gone"]["ranges"] == [[0, 150]]
    assert s["dirty_bytes"] == sum(f["dirty_bytes"] for f in s["files"])  # only what is lost is listed
    fs.power_failure()
    assert (fs / "log").read_bytes() == synced + w1 + w2[:k_log]
    idx = bytearray(base)
    idx[9000:9100] = early
    idx[PAGE:PAGE + k_idx] = over[:k_idx]
    assert (fs / "d" / "idx").read_bytes() == bytes(idx)
    assert (fs / "gone").read_bytes() == b"g" * 100 + bytes(50)


def test_the_torn_prefix_comes_from_the_seed(mount):
    def torn(seed: int) -> int:
        fs = mount()
        put(fs / "seg.log", b"s" * 100, sync=True)
        put(fs / "seg.log", b"w" * 4000, off=PAGE)
        k = files(powerfail_torn(fs, seed))["seg.log"]["torn"]["kept"]
        fs.power_failure()
        assert (fs / "seg.log").read_bytes() == b"s" * 100 + bytes(PAGE - 100) + b"w" * k
        fs.kill()
        return k

    assert torn(7) == torn(7) == torn_prefix(7, "seg.log", 4000)
    assert len({torn(seed) for seed in (1, 2, 3)}) > 1
