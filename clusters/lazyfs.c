/*
 * lazyfs: a FUSE filesystem modelling a disk whose unsynced writes live in the page cache.
 *
 *   lazyfs [--ctl=FIFO] [--log=FILE] [--writeback-age=SECONDS [--writeback-interval=SECONDS]]
 *          [--manual-clock] [-o OPTS] BACKING_DIR MOUNTPOINT
 *
 * Everything passes straight through to BACKING_DIR except file data: write() (and the
 * kernel's writeback of shared mmap pages) lands in 4 KiB pages in this process's memory
 * and reaches the backing file only on fsync/fdatasync of that file, the `flush` control
 * command, the --writeback-age expiry (if given), or a clean unmount (SIGTERM, fusermount3
 * -u). SIGKILL is a power failure: what was not synced vanishes with our memory. Metadata
 * (create, rename, unlink, truncate, chmod, ...) is synchronous: it changes BACKING_DIR now.
 *
 * The clock (page ages, writeback, the times in the stats) is the real one, unless
 * --manual-clock (which needs --ctl): then it starts at the real time and moves only by
 * `advance`. File mtimes, the log's timestamps and `delay` stay on the real clock.
 *
 * Control FIFO (--ctl, one command per line):
 *   delay W F    sleep W ms in every write and F ms in every fsync (0 0: off)
 *   flush        write every dirty page back and fsync the files
 *   clear        drop every dirty page (sizes fall back to the backing files); a file
 *                that is open keeps its kernel-cached pages until it is opened again
 *   stats PATH   write one JSON line to PATH (via PATH.tmp + rename); dirty_bytes counts
 *                whole 4 KiB pages; synced_bytes/dropped_bytes are running totals; `files`
 *                lists each file with dirty pages: its path relative to BACKING_DIR (null
 *                if it has none), dirty_bytes (whole pages), the age and wall time of its
 *                oldest dirty page, its size, and the dirty byte ranges (at most 64, then
 *                ranges_cut)
 *   powerfail PATH [torn SEED]
 *                freeze, then write the stats as `stats PATH` does. Frozen, nothing more
 *                reaches the backing files: writeback, `flush` and unmount write nothing,
 *                and every write and fsync fails with EIO. So the stats list exactly what
 *                a SIGKILL then loses. With `torn SEED`, a power failure in the middle of
 *                writing back: every dirty file whose last write is still unsynced is first
 *                written back whole except for that last write, of which only a prefix
 *                reaches the backing file (its length drawn from SEED and the file's path,
 *                0 to length-1 bytes); the torn-away bytes keep what the backing file had
 *                (nothing, past its old end: an append ends at the prefix). Such a file is
 *                listed with exactly the torn range and a `torn` object {offset, length,
 *                kept}. Dirty files without a known last write lose everything unsynced.
 *   limit BYTES  a disk of BYTES: a write, truncate or fallocate that would make the files'
 *                data (used_bytes) larger fails with ENOSPC; a write that fits in part is
 *                cut short to what fits. `limit off`: no limit (the default).
 *   full HEADROOM
 *                limit = used_bytes + HEADROOM, taken at once (no write slips in between)
 *   advance MS   (--manual-clock only) move the clock MS milliseconds on, running on the way
 *                each writeback wake-up that falls in them, at its time, as if the time had
 *                passed. Done, like every command, before the next command is read.
 *
 * used_bytes is the sum of the apparent sizes of the regular files (each inode once, as
 * `du --apparent-size`): a sparse file counts in full, a file's space is freed when its last
 * name and last handle are gone. It is counted at start and kept up to date by every write,
 * truncate, fallocate, unlink and rename. statfs shows the limit as the disk's size. The
 * stats carry used_bytes, limit_bytes (null: none) and enospc (ENOSPC answers so far).
 *
 * State per file lives in a `struct lfile` keyed by the backing inode (dev, ino), so it
 * follows renames and hard links. An lfile holds an fd on its inode, which pins the inode
 * number: it cannot be reused by another file while the lfile exists.
 *
 * Locking: map_lock guards the inode map and every lfile's refs and linked fields; it is
 * never taken while holding a file lock. Each lfile's rwlock guards its pages and size:
 * reads share it, writes and truncates own it. No lock is global on the read/write path
 * except the short one around the free-page pool; flush_lock is shared by every flush and
 * taken exclusively only by `powerfail`, to wait out the flushes under way.
 *
 * Build: gcc -O2 -Wall -Wextra lazyfs.c $(pkg-config --cflags --libs fuse3) -lpthread
 */
#define FUSE_USE_VERSION 312 /* libfuse >= 3.12: fuse_loop_cfg (Debian 12 has 3.14) */
#define _GNU_SOURCE
#include <fuse.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define NBUCKET 65536
#define IOVN 256        /* pages per pwritev: 1 MiB */
#define POOL_MAX 16384  /* free pages kept for reuse: 64 MiB */
#define REL(p) ((p)[1] ? (p) + 1 : ".") /* FUSE path -> path relative to rootfd */
#define FH(fi) ((struct lfile *)(uintptr_t)(fi)->fh)
#define DH(fi) ((DIR *)(uintptr_t)(fi)->fh)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define RDLOCK(l) pthread_rwlock_rdlock(&(l)->lock)
#define WRLOCK(l) pthread_rwlock_wrlock(&(l)->lock)
#define UNLOCK(l) pthread_rwlock_unlock(&(l)->lock)

struct page {
	uint64_t gen;     /* the lfile's gen at the last write into this page */
	int64_t first_ms; /* monotonic ms when it went from clean to dirty */
	char data[PAGE];
};

struct lfile {
	struct lfile *next;       /* hash chain (map_lock) */
	dev_t dev;
	ino_t ino;
	int refs;                 /* open handles + temporary pins (map_lock) */
	bool linked;              /* in the map; false once its last name is gone (map_lock) */
	bool rdonly;              /* fd is O_RDONLY: only read-only opens were possible */
	int fd;                   /* on the backing inode; shared by all handles (pread/pwrite only) */
	pthread_rwlock_t lock;
	_Atomic int64_t size;     /* logical size; invariant: backing size <= size */
	struct page **pg;         /* pg[i] holds bytes [i*PAGE, (i+1)*PAGE) if dirty, else NULL */
	size_t cap;
	_Atomic long ndirty;      /* non-NULL entries of pg */
	uint64_t gen;             /* bumped by every write and truncate */
	_Atomic int64_t dirtied;  /* the oldest first_ms of its pages (while ndirty > 0) */
	_Atomic int64_t mtime_ns; /* wall time of the last write, reported while dirty */
	_Atomic unsigned clears_seen; /* `clears` when a handle was last opened */
	bool dead;                /* its last name is gone: its size leaves used_bytes when freed (map_lock) */
	/* The last write, while unsynced (lw_len > 0): where, how long, the size before it, the
	 * gen it made, and when (monotonic ms). A flush that wrote it, a truncate, a fallocate that
	 * grew the file or `clear` forget it. */
	int64_t lw_off, lw_len, lw_prev, lw_ms;
	uint64_t lw_gen;
	/* `powerfail ... torn`: the bytes [torn_from, torn_to) of the last write did not reach the
	 * backing file; torn_kept of them did. Set only once frozen. */
	bool torn;
	int64_t torn_from, torn_to, torn_kept;
};

static int rootfd = -1;
static const char *ctl_path;
static char *root_path; /* realpath of BACKING_DIR, to name files in the stats */
static double writeback_age; /* seconds; 0 = never */
static double writeback_interval; /* seconds between the flusher's wake-ups; 0: a quarter of the age, 50 ms-1 s */
static int64_t wb_age, wb_every;  /* the same in ms, as the flusher uses them */
static bool manual_clock;         /* --manual-clock: the clock moves only by `advance` */
static int64_t mono0_ms, wall0_ms; /* --manual-clock: the real clocks at start */
static _Atomic int64_t advanced_ms; /* --manual-clock: how far `advance` moved the clock */
static int64_t next_wake_ms;      /* --manual-clock: the flusher's next wake-up */
static FILE *logf_;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lfile *map[NBUCKET];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct page *pool; /* free pages, linked through their first bytes */
static size_t npool;
static _Atomic uint64_t dirty_pages, synced_bytes, dropped_bytes, nwrites, nfsyncs;
static _Atomic int write_delay_ms, fsync_delay_ms;
static _Atomic long long delayed_ms; /* every ms `delay` has slept, for the stats */
static _Atomic unsigned clears; /* `clear` commands so far */
static _Atomic bool frozen;     /* `powerfail` came: no data may reach the backing files */
static _Atomic int64_t used_bytes;       /* apparent size of every regular file, each inode once */
static _Atomic int64_t limit_bytes = -1; /* `limit`: the disk's size; -1: none */
static _Atomic uint64_t nenospc;         /* ENOSPC answers */
static pthread_rwlock_t flush_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

/* ---- helpers ---- */

static void vlogmsg(const char *fmt, va_list ap) {
	char ts[32];
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", gmtime_r(&now.tv_sec, &tm));
	FILE *f = logf_ ? logf_ : stderr;
	flockfile(f);
	fprintf(f, "%s.%03ldZ lazyfs[%d]: ", ts, now.tv_nsec / 1000000, (int)getpid());
	vfprintf(f, fmt, ap);
	fputc('\n', f);
	fflush(f);
	funlockfile(f);
}

static void logmsg(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vlogmsg(fmt, ap);
	va_end(ap);
}

/* libfuse emits one message in several calls: gather them into lines */
static void fuse_logger(enum fuse_log_level level, const char *fmt, va_list ap) {
	static __thread char line[1024];
	size_t n = strlen(line);
	(void)level;
	vsnprintf(line + n, sizeof line - n, fmt, ap);
	n = strlen(line);
	if (n && (line[n - 1] == '\n' || n == sizeof line - 1)) {
		line[strcspn(line, "\n")] = 0;
		logmsg("%s", line);
		line[0] = 0;
	}
}

/* ms on clock `id`, or, with --manual-clock, `start` (its value at start-up) plus what `advance` added. */
static int64_t clock_ms(clockid_t id, int64_t start) {
	struct timespec t;
	if (manual_clock)
		return start + advanced_ms;
	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Monotonic ms: page ages and writeback. */
static int64_t now_ms(void) { return clock_ms(CLOCK_MONOTONIC, mono0_ms); }

/* Wall-clock ms for the stats: moves with now_ms(). */
static int64_t wall_ms(void) { return clock_ms(CLOCK_REALTIME, wall0_ms); }

static void sleep_ms(int ms) {
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (ms > 0 && nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* The `delay` command's sleep, counted in the stats' delayed_ms. */
static void delay(int ms) {
	if (ms > 0) {
		delayed_ms += ms;
		sleep_ms(ms);
	}
}

static int ret(int r) { return r < 0 ? -errno : 0; }

/* Pages come and go by the hundred thousand: a pool beats malloc's page faults and trims. */
static struct page *page_alloc(void) {
	pthread_mutex_lock(&pool_lock);
	struct page *p = pool;
	if (p) {
		memcpy(&pool, p->data, sizeof pool);
		npool--;
	}
	pthread_mutex_unlock(&pool_lock);
	return p ? p : malloc(sizeof *p);
}

static void page_free(struct page *p) {
	pthread_mutex_lock(&pool_lock);
	if (npool < POOL_MAX) {
		memcpy(p->data, &pool, sizeof pool);
		pool = p;
		npool++;
		p = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	free(p);
}

/* ---- disk space (`limit`, `full`) ---- */

/* Take up to `want` bytes of room for a file to grow by; returns how many it got (all of
 * `want` when no limit is set). The caller gives back what it does not use (unreserve). */
static int64_t reserve(int64_t want) {
	int64_t cur = used_bytes;
	for (;;) {
		int64_t lim = limit_bytes, got = lim < 0 ? want : MIN(want, MAX(0, lim - cur));
		if (got <= 0)
			return 0;
		if (atomic_compare_exchange_weak(&used_bytes, &cur, cur + got))
			return got;
	}
}

static void unreserve(int64_t n) { used_bytes -= n; }

static int enospc(void) {
	nenospc++;
	return -ENOSPC;
}

/* ---- the inode map ---- */

static struct lfile **bucket(dev_t dev, ino_t ino) {
	return &map[(((uint64_t)ino ^ (uint64_t)dev << 40) * 0x9E3779B97F4A7C15ULL) >> 48];
}

static struct lfile *find(dev_t dev, ino_t ino) { /* map_lock held */
	struct lfile *l = *bucket(dev, ino);
	while (l && (l->ino != ino || l->dev != dev))
		l = l->next;
	return l;
}

static void unhash(struct lfile *l) { /* map_lock held */
	struct lfile **pp = bucket(l->dev, l->ino);
	while (*pp != l)
		pp = &(*pp)->next;
	*pp = l->next;
	l->linked = false;
}

/* Free the pages with index >= first, or only those with gen <= maxgen (after a flush).
 * A flush passes the time its writes ended as `clean_ms`: a page it keeps was written to
 * since, so it is dirty from then on, not from its first_ms. `dropped` counts the freed
 * pages as lost to `clear`. Write lock held, or the caller is sole owner. */
static void drop_pages(struct lfile *l, size_t first, uint64_t maxgen, int64_t clean_ms, bool dropped) {
	long n = 0;
	int64_t oldest = INT64_MAX;
	for (size_t i = 0; i < l->cap; i++) {
		struct page *p = l->pg[i];
		if (!p)
			continue;
		if (i >= first && p->gen <= maxgen) {
			page_free(p);
			l->pg[i] = NULL;
			n++;
			continue;
		}
		if (p->first_ms < clean_ms)
			p->first_ms = clean_ms;
		oldest = MIN(oldest, p->first_ms);
	}
	l->ndirty -= n;
	dirty_pages -= n;
	if (dropped)
		dropped_bytes += (uint64_t)n * PAGE;
	if (l->ndirty == 0) {
		free(l->pg);
		l->pg = NULL;
		l->cap = 0;
	} else {
		l->dirtied = oldest;
	}
}

static void lfree(struct lfile *l) {
	if (l->dead) /* the last name went earlier, the last handle now: the space is free */
		unreserve(l->size);
	drop_pages(l, 0, UINT64_MAX, 0, false);
	close(l->fd);
	pthread_rwlock_destroy(&l->lock);
	free(l);
}

/* Drop a reference. The last one frees the lfile, unless it still holds unsynced pages of
 * a file that has a name: those stay, like a closed file's dirty page cache. With refs at
 * 0 nobody can write to it, so reading ndirty without the file lock is safe. */
static void put(struct lfile *l) {
	pthread_mutex_lock(&map_lock);
	bool gone = --l->refs == 0 && (!l->linked || l->ndirty == 0);
	if (gone && l->linked)
		unhash(l);
	pthread_mutex_unlock(&map_lock);
	if (gone)
		lfree(l);
}

/* Attach an fd on a backing file to its lfile (made on first use) and take a reference.
 * Consumes fd. The size is read under map_lock, so a concurrent truncate cannot be missed. */
static int attach(int fd, bool rdonly, struct lfile **out) {
	struct stat st;
	pthread_mutex_lock(&map_lock);
	int err = fstat(fd, &st) < 0 ? errno : 0;
	struct lfile *l = err ? NULL : find(st.st_dev, st.st_ino);
	if (l) {
		l->refs++;
	} else if (!err && (l = calloc(1, sizeof *l))) {
		pthread_rwlockattr_t a; /* glibc prefers readers by default: appenders could starve */
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&l->lock, &a);
		pthread_rwlockattr_destroy(&a);
		l->dev = st.st_dev, l->ino = st.st_ino, l->fd = fd, l->rdonly = rdonly;
		l->refs = 1, l->linked = true;
		l->size = st.st_size;
		l->next = *bucket(l->dev, l->ino);
		*bucket(l->dev, l->ino) = l;
		fd = -1;
	}
	pthread_mutex_unlock(&map_lock);
	if (!l) {
		close(fd);
		return err ? -err : -ENOMEM;
	}
	if (fd >= 0 && !rdonly && l->rdonly) {
		WRLOCK(l); /* a writer arrived: upgrade the shared fd (dup2 swaps it atomically) */
		if (l->rdonly && dup2(fd, l->fd) >= 0)
			l->rdonly = false;
		UNLOCK(l);
	}
	if (fd >= 0)
		close(fd);
	*out = l;
	return 0;
}

/* Pin every lfile in the map (only dirty ones if asked); the caller put()s each. */
static struct lfile **pin_all(size_t *n, bool dirty_only) {
	size_t cap = 64, k = 0;
	struct lfile **v = malloc(cap * sizeof *v), **w;
	pthread_mutex_lock(&map_lock);
	for (size_t b = 0; v && b < NBUCKET; b++)
		for (struct lfile *l = map[b]; l; l = l->next) {
			if (dirty_only && !l->ndirty)
				continue;
			if (k == cap) {
				if (!(w = realloc(v, 2 * cap * sizeof *v)))
					goto out;
				v = w, cap *= 2;
			}
			l->refs++;
			v[k++] = l;
		}
out:
	pthread_mutex_unlock(&map_lock);
	*n = k;
	return v;
}

/* After a name went away (unlink, rename over it): if that was the inode's last link,
 * forget its unsynced data as the kernel would. Open handles keep the lfile (detached)
 * until released; its space is freed with it. `was` is the inode as stat'ed before: with
 * no lfile, its size leaves used_bytes if that was its last link. */
static void forget_if_gone(const struct stat *was) {
	struct stat st;
	pthread_mutex_lock(&map_lock);
	struct lfile *l = find(was->st_dev, was->st_ino);
	bool gone = l && fstat(l->fd, &st) == 0 && st.st_nlink == 0;
	if (gone) {
		unhash(l);
		l->dead = true;
	} else if (!l && was->st_nlink == 1) {
		unreserve(was->st_size);
	}
	gone = gone && l->refs == 0;
	pthread_mutex_unlock(&map_lock);
	if (gone)
		lfree(l);
}

/* ---- file data ---- */

/* The page at index i, made on demand. A new page that the caller will overwrite only in
 * part is first read from the backing file (zeros past its end). Write lock held. */
static struct page *getpage(struct lfile *l, size_t i, bool fill, int *err) {
	if (i >= l->cap) {
		size_t cap = l->cap ? l->cap : 16;
		while (cap <= i)
			cap *= 2;
		struct page **pg = realloc(l->pg, cap * sizeof *pg);
		if (!pg)
			return *err = -ENOMEM, NULL;
		memset(pg + l->cap, 0, (cap - l->cap) * sizeof *pg);
		l->pg = pg, l->cap = cap;
	}
	if (l->pg[i])
		return l->pg[i];
	struct page *p = page_alloc();
	if (!p)
		return *err = -ENOMEM, NULL;
	ssize_t got = 0, r;
	while (fill && got < PAGE && (r = pread(l->fd, p->data + got, PAGE - got, (off_t)i * PAGE + got))) {
		if (r < 0 && errno != EINTR)
			return *err = -errno, page_free(p), NULL;
		got += r > 0 ? r : 0;
	}
	if (fill)
		memset(p->data + got, 0, PAGE - got);
	p->first_ms = now_ms();
	l->pg[i] = p;
	if (l->ndirty++ == 0)
		l->dirtied = p->first_ms;
	dirty_pages++;
	return p;
}

static int lwrite(struct lfile *l, const char *buf, size_t n, off_t off) {
	int err = 0;
	size_t done = 0;
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	WRLOCK(l);
	if (frozen) { /* after the powerfail report: it would be lost without being listed */
		UNLOCK(l);
		return -EIO;
	}
	int64_t size0 = l->size, grow = MAX(0, off + (int64_t)n - size0), got = grow ? reserve(grow) : 0;
	if (got < grow) { /* the disk is full: write what fits, if anything */
		int64_t fit = size0 + got - off;
		if (fit <= 0) {
			unreserve(got);
			UNLOCK(l);
			return enospc();
		}
		n = (size_t)fit;
	}
	l->gen++;
	while (done < n) {
		off_t pos = off + (off_t)done;
		size_t in = pos % PAGE, k = MIN(PAGE - in, n - done);
		struct page *p = getpage(l, pos / PAGE, k < PAGE, &err);
		if (!p)
			break;
		memcpy(p->data + in, buf + done, k);
		p->gen = l->gen;
		done += k;
	}
	if (off + (off_t)done > l->size)
		l->size = off + (off_t)done;
	unreserve(got - (l->size - size0)); /* what a failed page allocation left unused */
	if (done) {
		l->lw_off = off, l->lw_len = (int64_t)done, l->lw_prev = size0;
		l->lw_gen = l->gen, l->lw_ms = now_ms();
	}
	l->mtime_ns = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
	UNLOCK(l);
	return done ? (int)done : err;
}

/* A read is the backing file, zero-filled up to the logical size, with dirty pages laid over. */
static int lread(struct lfile *l, char *buf, size_t n, off_t off) {
	size_t got = 0;
	ssize_t r = 1;
	RDLOCK(l);
	n = off >= l->size ? 0 : MIN(n, (size_t)(l->size - off));
	while (got < n && (r = pread(l->fd, buf + got, n - got, off + (off_t)got)) != 0) {
		if (r < 0 && errno != EINTR)
			break;
		got += r > 0 ? r : 0;
	}
	int err = r < 0 ? -errno : 0;
	memset(buf + got, 0, n - got);
	for (size_t i = off / PAGE; !err && l->ndirty && i < l->cap && (off_t)i * PAGE < off + (off_t)n; i++) {
		if (!l->pg[i])
			continue;
		off_t from = (off_t)i * PAGE > off ? (off_t)i * PAGE : off;
		off_t to = MIN((off_t)(i + 1) * PAGE, off + (off_t)n);
		memcpy(buf + (from - off), l->pg[i]->data + (from - (off_t)i * PAGE), to - from);
	}
	UNLOCK(l);
	return err ? err : (int)n;
}

/* truncate is metadata: the backing file changes now; dirty pages past the cut go. */
static int ltruncate(struct lfile *l, off_t size) {
	WRLOCK(l);
	int64_t grow = MAX(0, (int64_t)size - l->size), got = grow ? reserve(grow) : 0;
	if (got < grow) {
		unreserve(got);
		UNLOCK(l);
		return enospc();
	}
	int err = ret(ftruncate(l->fd, size));
	if (err)
		unreserve(got);
	if (!err) {
		if (!grow)
			unreserve(l->size - size);
		l->lw_len = 0;
		size_t keep = (size + PAGE - 1) / PAGE;
		drop_pages(l, keep, UINT64_MAX, 0, false);
		l->gen++;
		if (size % PAGE && keep - 1 < l->cap && l->pg[keep - 1]) { /* a later grow must read zeros */
			memset(l->pg[keep - 1]->data + size % PAGE, 0, PAGE - size % PAGE);
			l->pg[keep - 1]->gen = l->gen;
		}
		l->size = size;
	}
	UNLOCK(l);
	return err;
}

static int write_iov(int fd, struct iovec *iov, int n, off_t off) {
	while (n > 0) {
		ssize_t r = pwritev(fd, iov, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		for (off += r; n > 0 && (size_t)r >= iov->iov_len; iov++, n--)
			r -= iov->iov_len;
		if (n > 0)
			iov->iov_base = (char *)iov->iov_base + r, iov->iov_len -= r;
	}
	return 0;
}

/* Write l's dirty pages to the backing file, then fsync (sync=2), fdatasync (1) or not (0).
 * Pages are written under the read lock, so readers carry on, and freed under the write
 * lock only if no write touched them meanwhile (page gen <= the snapshot). Once frozen,
 * -EIO: the stats `powerfail` wrote must stay true until the SIGKILL. */
static int lflush(struct lfile *l, int sync) {
	int err = 0, n = 0;
	pthread_rwlock_rdlock(&flush_lock);
	if (frozen)
		err = -EIO;
	if (l->ndirty && !err) {
		struct iovec iov[IOVN];
		off_t at = 0;
		uint64_t bytes = 0;
		RDLOCK(l);
		uint64_t g0 = l->gen;
		off_t size = l->size;
		for (size_t i = 0; i < l->cap && !err; i++) {
			off_t o = (off_t)i * PAGE;
			if (!l->pg[i] || o >= size)
				continue;
			if (n && (n == IOVN || at + (off_t)n * PAGE != o)) /* not contiguous, or full */
				err = write_iov(l->fd, iov, n, at), n = 0;
			at = n ? at : o;
			iov[n].iov_base = l->pg[i]->data;
			iov[n].iov_len = MIN(PAGE, (size_t)(size - o)); /* never past the logical size */
			bytes += iov[n++].iov_len;
		}
		if (n && !err)
			err = write_iov(l->fd, iov, n, at);
		int64_t written = now_ms();
		UNLOCK(l);
		if (!err) {
			WRLOCK(l);
			drop_pages(l, 0, g0, written, false);
			if (l->lw_gen <= g0)
				l->lw_len = 0;
			UNLOCK(l);
			synced_bytes += bytes;
		}
	}
	pthread_rwlock_unlock(&flush_lock);
	if (!err && sync && (sync == 2 ? fsync(l->fd) : fdatasync(l->fd)) < 0)
		err = -errno;
	return err;
}

/* `clear`: drop every unsynced page; the logical size falls back to the backing size. */
static void lclear(struct lfile *l) {
	struct stat st;
	WRLOCK(l);
	drop_pages(l, 0, UINT64_MAX, 0, true);
	l->gen++;
	l->lw_len = 0;
	if (fstat(l->fd, &st) == 0) {
		unreserve(l->size - st.st_size);
		l->size = st.st_size;
	}
	UNLOCK(l);
}

/* ---- torn writes (`powerfail PATH torn SEED`) ---- */

static uint64_t mix64(uint64_t x) { /* splitmix64 */
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static uint64_t fnv1a(const char *s) {
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static char *relpath(int fd);

/* The power fails while l is being written back, in the middle of its last write: every
 * dirty byte reaches the backing file except the tail of that write, of which `kept` bytes
 * (drawn from the seed and the path) do. Bytes of the tail below the file's size before the
 * write keep what the backing file holds; past it there is nothing, so an append ends at the
 * prefix. Left dirty, to be listed and lost, are only the pages of the torn range. Write lock
 * held, frozen, flushes waited out. Returns the bytes written or -errno. */
static int64_t tear(struct lfile *l, uint64_t seed) {
	char *path = relpath(l->fd);
	uint64_t h = mix64(seed ^ (path ? fnv1a(path) : mix64((uint64_t)l->ino)));
	free(path);
	int64_t off = l->lw_off, len = l->lw_len, prev = l->lw_prev, written = 0;
	int64_t keep = (int64_t)(h % (uint64_t)len), t0 = off + keep, t1 = off + len;
	int64_t cut = t1 > prev ? MAX(prev, t0) : l->size; /* the write grew the file: it ends at the prefix */
	struct stat st;
	for (size_t i = 0; i < l->cap; i++) {
		if (!l->pg[i])
			continue;
		int64_t from = (int64_t)i * PAGE, to = MIN(from + PAGE, cut);
		int64_t seg[2][2] = { { from, MIN(to, t0) }, { MAX(from, t1), to } };
		for (int k = 0; k < 2; k++) {
			if (seg[k][0] >= seg[k][1])
				continue;
			struct iovec v = { l->pg[i]->data + (seg[k][0] - from), (size_t)(seg[k][1] - seg[k][0]) };
			int r = write_iov(l->fd, &v, 1, seg[k][0]);
			if (r < 0)
				return r;
			written += seg[k][1] - seg[k][0];
		}
	}
	if (fstat(l->fd, &st) < 0 || (st.st_size < cut && ftruncate(l->fd, cut) < 0))
		return -errno;
	/* Unsynced writes older than the last one into the bytes it overwrote are lost with it. */
	int64_t oldest = l->lw_ms;
	long freed = 0;
	for (size_t i = 0; i < l->cap; i++) {
		int64_t from = (int64_t)i * PAGE;
		if (!l->pg[i])
			continue;
		if (from + PAGE <= t0 || from >= t1) {
			page_free(l->pg[i]);
			l->pg[i] = NULL;
			freed++;
		} else if (from < MIN(t1, prev)) {
			oldest = MIN(oldest, l->pg[i]->first_ms);
		}
	}
	l->ndirty -= freed;
	dirty_pages -= freed;
	l->dirtied = oldest;
	l->torn = true, l->torn_from = t0, l->torn_to = t1, l->torn_kept = keep;
	synced_bytes += (uint64_t)written;
	return written;
}

/* `powerfail ... torn SEED`: tear every dirty file whose last write is unsynced. */
static void tear_all(uint64_t seed) {
	size_t n, torn = 0;
	struct lfile **v = pin_all(&n, true);
	for (size_t i = 0; i < n; i++) {
		struct lfile *l = v[i];
		WRLOCK(l);
		if (l->lw_len > 0 && l->ndirty > 0) {
			int64_t r = tear(l, seed);
			if (r < 0)
				logmsg("ctl powerfail: tearing inode %lu failed: %s", (unsigned long)l->ino, strerror((int)-r));
			else
				torn++, logmsg("ctl powerfail: inode %lu torn at %lld: kept %lld of a %lld-byte write",
					       (unsigned long)l->ino, (long long)l->lw_off, (long long)l->torn_kept,
					       (long long)l->lw_len);
		}
		UNLOCK(l);
		put(l);
	}
	free(v);
	logmsg("ctl powerfail: torn (seed %llu): %zu files", (unsigned long long)seed, torn);
}

/* ---- FUSE operations (paths are relative to rootfd; handle ops ignore the path) ---- */

static void overlay(struct lfile *l, struct stat *st) {
	int64_t ns = l->mtime_ns, cur = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	st->st_size = l->size;
	if (l->ndirty && ns > cur) {
		st->st_mtim = (struct timespec){ ns / 1000000000, ns % 1000000000 };
		st->st_ctim = st->st_mtim;
	}
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
	if (fi) { /* the kernel passes a handle only for regular files */
		if (fstat(FH(fi)->fd, st) < 0)
			return -errno;
		overlay(FH(fi), st);
		return 0;
	}
	if (fstatat(rootfd, REL(path), st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISREG(st->st_mode)) {
		pthread_mutex_lock(&map_lock);
		struct lfile *l = find(st->st_dev, st->st_ino);
		if (l)
			overlay(l, st);
		pthread_mutex_unlock(&map_lock);
	}
	return 0;
}

/* New nodes belong to the caller, not to us (we usually run as root). */
static int own(int r, const char *path, int fd) {
	struct fuse_context *c = fuse_get_context();
	if (r == 0 && geteuid() == 0 && (c->uid || c->gid))
		(void)!(fd >= 0 ? fchown(fd, c->uid, c->gid)
				: fchownat(rootfd, REL(path), c->uid, c->gid, AT_SYMLINK_NOFOLLOW));
	return r;
}

static int fs_readlink(const char *path, char *buf, size_t size) {
	ssize_t n = readlinkat(rootfd, REL(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

static int fs_mknod(const char *path, mode_t mode, dev_t rdev) {
	return own(ret(mknodat(rootfd, REL(path), mode, rdev)), path, -1);
}

static int fs_mkdir(const char *path, mode_t mode) {
	return own(ret(mkdirat(rootfd, REL(path), mode)), path, -1);
}

static int fs_symlink(const char *target, const char *path) {
	return own(ret(symlinkat(target, rootfd, REL(path))), path, -1);
}

static int fs_rmdir(const char *path) { return ret(unlinkat(rootfd, REL(path), AT_REMOVEDIR)); }

static int fs_link(const char *from, const char *to) {
	return ret(linkat(rootfd, REL(from), rootfd, REL(to), 0));
}

static int fs_unlink(const char *path) {
	struct stat st;
	bool reg = fstatat(rootfd, REL(path), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
	if (unlinkat(rootfd, REL(path), 0) < 0)
		return -errno;
	if (reg)
		forget_if_gone(&st);
	return 0;
}

static int fs_rename(const char *from, const char *to, unsigned int flags) {
	struct stat st; /* the inode `to` names now may lose its last link (not in an exchange) */
	bool reg = !(flags & RENAME_EXCHANGE) && fstatat(rootfd, REL(to), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		   S_ISREG(st.st_mode);
	struct stat src; /* renamed onto itself (two links of one inode): nothing goes */
	if (reg && fstatat(rootfd, REL(from), &src, AT_SYMLINK_NOFOLLOW) == 0 && src.st_ino == st.st_ino &&
	    src.st_dev == st.st_dev)
		reg = false;
	if (renameat2(rootfd, REL(from), rootfd, REL(to), flags) < 0)
		return -errno;
	if (reg)
		forget_if_gone(&st);
	return 0;
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
	return ret(fi ? fchmod(FH(fi)->fd, mode) : fchmodat(rootfd, REL(path), mode, 0));
}

static int fs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
	return ret(fi ? fchown(FH(fi)->fd, uid, gid) : fchownat(rootfd, REL(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

/* Open (or create) the backing file and attach it. We open O_RDWR whatever the caller
 * asked: a write-only handle still reads for read-modify-write, and all handles of an
 * inode share one fd. O_APPEND/O_DIRECT/O_SYNC are the kernel's business (it picks append
 * offsets and sends fsync for O_SYNC writes); O_TRUNC is ours (dirty pages must go). */
static int open_common(const char *path, int flags, mode_t mode, struct fuse_file_info *fi) {
	int bflags = O_CLOEXEC | (flags & (O_CREAT | O_EXCL | O_NOFOLLOW)), r;
	bool rdonly = false;
	int fd = openat(rootfd, REL(path), bflags | O_RDWR, mode);
	if (fd < 0 && (flags & O_ACCMODE) == O_RDONLY && errno != ENOENT && errno != EEXIST)
		fd = openat(rootfd, REL(path), bflags | O_RDONLY, mode), rdonly = true;
	if (fd < 0)
		return -errno;
	if (flags & O_CREAT)
		own(0, path, fd);
	struct lfile *l;
	if ((r = attach(fd, rdonly, &l)) == 0 && (flags & O_TRUNC) && (r = ltruncate(l, 0)) < 0)
		put(l);
	if (r == 0) {
		fi->fh = (uintptr_t)l;
		fi->direct_io = 0; /* use the page cache: shared writable mmap needs it */
		/* Every change goes through this mount, so the kernel's cache of the file is
		 * right, except after `clear`. Dropping it on every open would be wrong too: a
		 * write copies into cached pages before it reaches us, and an open by another
		 * thread that drops those pages lets a read fetch the old bytes from us. */
		unsigned c = clears;
		fi->keep_cache = l->clears_seen == c;
		l->clears_seen = c;
	}
	return r;
}

static int fs_open(const char *path, struct fuse_file_info *fi) {
	return open_common(path, fi->flags & ~(O_CREAT | O_EXCL), 0, fi);
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
	return open_common(path, fi->flags | O_CREAT, mode, fi);
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
	if (fi)
		return ltruncate(FH(fi), size);
	/* by path: through an lfile all the same, so no open can attach with a stale size */
	int fd = openat(rootfd, REL(path), O_RDWR | O_CLOEXEC), r;
	struct lfile *l;
	if (fd < 0)
		return -errno;
	if ((r = attach(fd, false, &l)) == 0) {
		r = ltruncate(l, size);
		put(l);
	}
	return r;
}

static int fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
	struct stat st;
	int r = ret(fi ? futimens(FH(fi)->fd, tv) : utimensat(rootfd, REL(path), tv, AT_SYMLINK_NOFOLLOW));
	if (!r && (fi ? fstat(FH(fi)->fd, &st) : fstatat(rootfd, REL(path), &st, AT_SYMLINK_NOFOLLOW)) == 0) {
		pthread_mutex_lock(&map_lock); /* explicit times win over the in-memory write time */
		struct lfile *l = find(st.st_dev, st.st_ino);
		if (l)
			l->mtime_ns = 0;
		pthread_mutex_unlock(&map_lock);
	}
	return r;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
	(void)path;
	return lread(FH(fi), buf, size, off);
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
	(void)path;
	delay(write_delay_ms);
	nwrites++;
	return lwrite(FH(fi), buf, size, off);
}

static int fs_statfs(const char *path, struct statvfs *sv) {
	(void)path;
	if (fstatvfs(rootfd, sv) < 0)
		return -errno;
	int64_t lim = limit_bytes, bs = sv->f_frsize ? (int64_t)sv->f_frsize : PAGE;
	if (lim >= 0) { /* the limit is the disk: what is left of it is free */
		sv->f_blocks = (fsblkcnt_t)(lim / bs);
		sv->f_bfree = sv->f_bavail = (fsblkcnt_t)(MAX(0, lim - (int64_t)used_bytes) / bs);
	}
	return 0;
}

static int fs_release(const char *path, struct fuse_file_info *fi) {
	(void)path;
	put(FH(fi));
	return 0;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
	(void)path;
	delay(fsync_delay_ms);
	nfsyncs++;
	return lflush(FH(fi), datasync ? 1 : 2);
}

static int fs_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
	struct lfile *l = FH(fi);
	(void)path;
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return -EOPNOTSUPP; /* punch/zero/collapse would have to edit dirty pages too */
	WRLOCK(l);
	int64_t grow = mode & FALLOC_FL_KEEP_SIZE ? 0 : MAX(0, off + len - l->size), got = grow ? reserve(grow) : 0;
	if (got < grow) {
		unreserve(got);
		UNLOCK(l);
		return enospc();
	}
	int r = ret(fallocate(l->fd, mode, off, len));
	if (r) {
		unreserve(got);
	} else if (grow) {
		l->size = off + len;
		l->lw_len = 0;
	}
	UNLOCK(l);
	return r;
}

static int fs_opendir(const char *path, struct fuse_file_info *fi) {
	int fd = openat(rootfd, REL(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC), e;
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	fi->fh = (uintptr_t)d;
	return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
	struct dirent *e;
	(void)path, (void)flags;
	if (off)
		seekdir(DH(fi), off);
	else
		rewinddir(DH(fi));
	while ((e = readdir(DH(fi)))) { /* names and types only: sizes must come from getattr */
		struct stat st = { .st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type) };
		if (fill(buf, e->d_name, &st, telldir(DH(fi)), 0))
			break;
	}
	return 0;
}

static int fs_releasedir(const char *path, struct fuse_file_info *fi) {
	(void)path;
	closedir(DH(fi));
	return 0;
}

static int fs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
	(void)path;
	delay(fsync_delay_ms);
	nfsyncs++;
	return ret(datasync ? fdatasync(dirfd(DH(fi))) : fsync(dirfd(DH(fi))));
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
	cfg->use_ino = 1;     /* inode numbers from the backing fs */
	cfg->nullpath_ok = 1; /* handle ops get no path: they use the handle */
	cfg->hard_remove = 1; /* no .fuse_hidden files: they would make Kafka's rmdir fail */
	cfg->kernel_cache = cfg->auto_cache = cfg->direct_io = 0;
	cfg->attr_timeout = cfg->entry_timeout = 1.0;
	cfg->negative_timeout = 0;
	conn->max_write = 1 << 20;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE; /* the kernel must not hold dirty data for us */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA; /* no cache drops on mtime changes: see open_common */
	logmsg("init: max_write=%u max_readahead=%u", conn->max_write, conn->max_readahead);
	return NULL;
}

static void flush_all(const char *why) {
	size_t n, bad = 0;
	uint64_t before = synced_bytes;
	if (frozen) {
		logmsg("%s: frozen by powerfail: nothing written", why);
		return;
	}
	struct lfile **v = pin_all(&n, true);
	for (size_t i = 0; i < n; i++) {
		int r = lflush(v[i], 2);
		if (r < 0 && bad++ == 0)
			logmsg("%s: flushing inode %lu failed: %s", why, (unsigned long)v[i]->ino, strerror(-r));
		put(v[i]);
	}
	free(v);
	logmsg("%s: flushed %zu files, %llu bytes%s", why, n, (unsigned long long)(synced_bytes - before),
	       bad ? " (with errors)" : "");
}

static void fs_destroy(void *data) {
	(void)data;
	flush_all("unmount"); /* a clean unmount writes everything back, like a clean shutdown */
}

static const struct fuse_operations ops = {
	.getattr = fs_getattr, .readlink = fs_readlink, .mknod = fs_mknod, .mkdir = fs_mkdir,
	.unlink = fs_unlink, .rmdir = fs_rmdir, .symlink = fs_symlink, .rename = fs_rename,
	.link = fs_link, .chmod = fs_chmod, .chown = fs_chown, .truncate = fs_truncate,
	.open = fs_open, .read = fs_read, .write = fs_write, .statfs = fs_statfs,
	.release = fs_release, .fsync = fs_fsync, .opendir = fs_opendir, .readdir = fs_readdir,
	.releasedir = fs_releasedir, .fsyncdir = fs_fsyncdir, .init = fs_init, .destroy = fs_destroy,
	.create = fs_create, .utimens = fs_utimens, .fallocate = fs_fallocate,
};

/* ---- control FIFO and background writeback ---- */

#define MAXRANGES 64

struct report { /* one dirty file in the stats */
	char *path;     /* relative to BACKING_DIR; NULL when it has no name */
	long ndirty;
	int64_t dirtied, size;
	int nr;         /* ranges found; more than MAXRANGES: cut */
	int64_t r[MAXRANGES][2];
	bool torn;      /* its last write was torn: r[0] is the torn range */
	int64_t t_off, t_len, t_kept;
};

/* Where fd's file is now, relative to BACKING_DIR (malloc'd), or NULL. */
static char *relpath(int fd) {
	char link[32], buf[PATH_MAX];
	struct stat st;
	if (!root_path || fstat(fd, &st) < 0 || st.st_nlink == 0) /* unlinked: readlink says "(deleted)" */
		return NULL;
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, buf, sizeof buf);
	size_t k = strcmp(root_path, "/") ? strlen(root_path) : 0;
	if (n <= 0 || (size_t)n >= sizeof buf)
		return NULL;
	buf[n] = 0;
	return strncmp(buf, root_path, k) == 0 && buf[k] == '/' ? strdup(buf + k + 1) : NULL;
}

/* The dirty byte ranges, whole pages merged when contiguous, cut at the size. Read lock held. */
static void describe(struct lfile *l, struct report *f) {
	f->ndirty = l->ndirty, f->dirtied = l->dirtied, f->size = l->size, f->nr = 0, f->torn = l->torn;
	if (l->torn) { /* exactly the bytes that did not reach the backing file */
		f->t_off = l->lw_off, f->t_len = l->lw_len, f->t_kept = l->torn_kept, f->nr = 1;
		f->r[0][0] = l->torn_from, f->r[0][1] = MIN(l->torn_to, f->size);
		return;
	}
	for (size_t i = 0; i < l->cap && f->nr <= MAXRANGES; i++) {
		int64_t from = (int64_t)i * PAGE, to = MIN(from + PAGE, f->size);
		if (!l->pg[i] || from >= to)
			continue;
		if (f->nr && f->r[f->nr - 1][1] == from)
			f->r[f->nr - 1][1] = to;
		else if (f->nr++ < MAXRANGES)
			f->r[f->nr - 1][0] = from, f->r[f->nr - 1][1] = to;
	}
}

/* Length of the UTF-8 sequence at p, 0 if it is not valid UTF-8 (overlong, surrogate, ...). */
static int utf8_len(const unsigned char *p) {
	int n = *p < 0x80 ? 1 : *p >= 0xC2 && *p <= 0xDF ? 2 : *p >= 0xE0 && *p <= 0xEF ? 3 : *p >= 0xF0 && *p <= 0xF4 ? 4 : 0;
	for (int k = 1; k < n; k++)
		if ((p[k] & 0xC0) != 0x80)
			return 0;
	if ((*p == 0xE0 && p[1] < 0xA0) || (*p == 0xED && p[1] > 0x9F) || (*p == 0xF0 && p[1] < 0x90) ||
	    (*p == 0xF4 && p[1] > 0x8F))
		return 0;
	return n;
}

/* s as a JSON string, or null. File names are bytes, JSON is UTF-8: a byte that is not
 * part of a valid sequence becomes U+FFFD. */
static void json_str(FILE *f, const char *s) {
	const unsigned char *p = (const unsigned char *)s;
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (int n; *p; p += n ? n : 1) {
		n = utf8_len(p);
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else if (n)
			fwrite(p, 1, n, f);
		else
			fputs("\\ufffd", f);
	}
	fputc('"', f);
}

static int by_path(const void *a, const void *b) {
	const char *x = ((const struct report *)a)->path, *y = ((const struct report *)b)->path;
	return x && y ? strcmp(x, y) : (x == NULL) - (y == NULL);
}

/* The stats JSON line, written to PATH.tmp and renamed to PATH. The clocks are read after
 * every file was looked at, so no page is younger than the report. */
static void write_stats(const char *path) {
	size_t n, dirty = 0;
	char tmp[PATH_MAX + 8];
	struct lfile **v = pin_all(&n, true);
	struct report *rep = calloc(n ? n : 1, sizeof *rep);
	for (size_t i = 0; i < n; i++) {
		struct report *r = rep ? &rep[dirty] : NULL;
		RDLOCK(v[i]);
		bool d = v[i]->ndirty > 0;
		if (d && r)
			describe(v[i], r);
		UNLOCK(v[i]);
		if (d && r)
			r->path = relpath(v[i]->fd);
		dirty += d;
		put(v[i]);
	}
	free(v);
	int64_t now = now_ms(), at = wall_ms(), oldest = INT64_MAX;
	for (size_t i = 0; rep && i < dirty; i++)
		oldest = MIN(oldest, rep[i].dirtied);
	if (rep)
		qsort(rep, dirty, sizeof *rep, by_path);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = rep ? fopen(tmp, "w") : NULL;
	if (f) {
		fprintf(f, "{\"dirty_bytes\": %llu, \"dirty_files\": %zu, \"synced_bytes\": %llu, "
			   "\"dropped_bytes\": %llu, \"writes\": %llu, \"fsyncs\": %llu, "
			   "\"write_delay_ms\": %d, \"fsync_delay_ms\": %d, \"delayed_ms\": %lld, \"pid\": %d, "
			   "\"at_unix_ms\": %lld, "
			   "\"used_bytes\": %lld, \"enospc\": %llu, ",
			(unsigned long long)dirty_pages * PAGE, dirty, (unsigned long long)synced_bytes,
			(unsigned long long)dropped_bytes, (unsigned long long)nwrites,
			(unsigned long long)nfsyncs, write_delay_ms, fsync_delay_ms, (long long)delayed_ms, (int)getpid(),
			(long long)at,
			(long long)used_bytes, (unsigned long long)nenospc);
		int64_t lim = limit_bytes;
		if (lim >= 0)
			fprintf(f, "\"limit_bytes\": %lld, ", (long long)lim);
		else
			fputs("\"limit_bytes\": null, ", f);
		if (dirty)
			fprintf(f, "\"oldest_age_ms\": %lld, \"files\": [", (long long)(now - oldest));
		else
			fputs("\"oldest_age_ms\": null, \"files\": [", f);
		for (size_t i = 0; i < dirty; i++) {
			struct report *r = &rep[i];
			fputs(i ? ", {\"path\": " : "{\"path\": ", f);
			json_str(f, r->path);
			fprintf(f, ", \"dirty_bytes\": %lld, \"oldest_age_ms\": %lld, \"oldest_unix_ms\": %lld, "
				   "\"size\": %lld, \"ranges\": [",
				(long long)r->ndirty * PAGE, (long long)(now - r->dirtied),
				(long long)(at - (now - r->dirtied)), (long long)r->size);
			for (int k = 0; k < MIN(r->nr, MAXRANGES); k++)
				fprintf(f, "%s[%lld, %lld]", k ? ", " : "", (long long)r->r[k][0], (long long)r->r[k][1]);
			fputs(r->nr > MAXRANGES ? "], \"ranges_cut\": true" : "]", f);
			if (r->torn)
				fprintf(f, ", \"torn\": {\"offset\": %lld, \"length\": %lld, \"kept\": %lld}",
					(long long)r->t_off, (long long)r->t_len, (long long)r->t_kept);
			fputc('}', f);
		}
		fputs("]}\n", f);
	}
	for (size_t i = 0; rep && i < dirty; i++)
		free(rep[i].path);
	free(rep);
	if (!f || fclose(f) != 0 || rename(tmp, path) < 0)
		logmsg("ctl stats: cannot write %s: %s", path, strerror(errno));
}

/* "... torn SEED" at the end of a powerfail argument: cut it off and return the seed. */
static bool torn_suffix(char *arg, uint64_t *seed) {
	char *t = NULL, *p = arg, *end;
	while ((p = strstr(p, " torn ")))
		t = p++;
	if (!t || !t[6] || t[6] == '-')
		return false;
	errno = 0;
	*seed = strtoull(t + 6, &end, 10);
	if (*end || errno)
		return false;
	*t = 0;
	return true;
}

static void advance(int64_t ms);

static void command(char *line) {
	char arg[PATH_MAX];
	int w, s;
	size_t n;
	long long bytes, ms;
	uint64_t seed;
	line[strcspn(line, "\r\n")] = 0;
	if (sscanf(line, "delay %d %d", &w, &s) == 2 && w >= 0 && s >= 0) {
		write_delay_ms = w;
		fsync_delay_ms = s;
		logmsg("ctl delay: write %d ms, fsync %d ms", w, s);
	} else if (strcmp(line, "flush") == 0) {
		flush_all("ctl flush");
	} else if (strcmp(line, "clear") == 0) {
		uint64_t before = dropped_bytes;
		struct lfile **v = pin_all(&n, true);
		for (size_t i = 0; i < n; i++)
			lclear(v[i]), put(v[i]);
		free(v);
		clears++;
		logmsg("ctl clear: dropped %llu bytes in %zu files", (unsigned long long)(dropped_bytes - before), n);
	} else if (sscanf(line, "stats %4095[^\n]", arg) == 1) {
		write_stats(arg);
	} else if (sscanf(line, "powerfail %4095[^\n]", arg) == 1) {
		bool torn = torn_suffix(arg, &seed);
		frozen = true;
		pthread_rwlock_wrlock(&flush_lock); /* the flushes under way end before the report */
		if (torn)
			tear_all(seed);
		pthread_rwlock_unlock(&flush_lock);
		write_stats(arg);
		logmsg("ctl powerfail: frozen with %llu bytes unsynced", (unsigned long long)dirty_pages * PAGE);
	} else if (strcmp(line, "limit off") == 0) {
		limit_bytes = -1;
		logmsg("ctl limit: off (%lld bytes used)", (long long)used_bytes);
	} else if (sscanf(line, "limit %lld%n", &bytes, &w) == 1 && !line[w] && bytes >= 0) {
		limit_bytes = bytes;
		logmsg("ctl limit: %lld bytes (%lld used)", bytes, (long long)used_bytes);
	} else if (sscanf(line, "full %lld%n", &bytes, &w) == 1 && !line[w] && bytes >= 0) {
		int64_t used = used_bytes; /* writes that reserve meanwhile only make the limit stricter */
		limit_bytes = used + bytes;
		logmsg("ctl full: limit %lld bytes (%lld used + %lld headroom)", (long long)(used + bytes),
		       (long long)used, bytes);
	} else if (sscanf(line, "advance %lld%n", &ms, &w) == 1 && !line[w] && ms >= 0 && ms <= INT64_MAX / 4) {
		if (manual_clock)
			advance(ms);
		else
			logmsg("ctl advance: ignored: the clock is the real one (no --manual-clock)");
	} else if (line[0]) {
		logmsg("ctl: unknown command ignored: %s", line);
	}
}

static void *ctl_thread(void *arg) {
	char *line = NULL;
	size_t cap = 0;
	(void)arg;
	/* O_RDWR: we count as a writer too, so reads never hit EOF when a client closes */
	int fd = open(ctl_path, O_RDWR | O_CLOEXEC);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
	if (!f) {
		logmsg("ctl: cannot open %s: %s", ctl_path, strerror(errno));
		return NULL;
	}
	while (getline(&line, &cap, f) > 0)
		command(line);
	return NULL;
}

/* The kernel's periodic writeback: the flusher wakes every vm.dirty_writeback_centisecs and
 * writes back each file whose oldest dirty page is older than vm.dirty_expire_centisecs, all
 * its pages (no fsync: the host's page cache survives our death). So a write is on disk once
 * it is between the age and the age plus one interval old. One wake-up's pass; returns the
 * oldest `dirtied` of the files it left dirty (INT64_MAX: none). */
static int64_t writeback_pass(void) {
	size_t n;
	int64_t left = INT64_MAX;
	struct lfile **v = pin_all(&n, true);
	for (size_t i = 0; i < n; i++) {
		int r = v[i]->ndirty && !frozen && now_ms() - v[i]->dirtied >= wb_age ? lflush(v[i], 0) : 0;
		if (r < 0 && !frozen)
			logmsg("writeback: inode %lu: %s", (unsigned long)v[i]->ino, strerror(-r));
		if (v[i]->ndirty)
			left = MIN(left, v[i]->dirtied);
		put(v[i]);
	}
	free(v);
	return left;
}

static void *writeback_thread(void *arg) {
	(void)arg;
	for (;;) {
		sleep_ms((int)wb_every);
		writeback_pass();
	}
	return NULL;
}

/* `advance MS` on the manual clock: the flusher's wake-ups fall at start + k * wb_every, and
 * each one up to now + MS runs its pass with the clock at its time. A wake-up at which no page
 * can be wb_age old is skipped: every page dirty after a pass at T (kept, or written since) is
 * dirty from no earlier than the oldest the pass left or T. */
static void advance(int64_t ms) {
	int64_t to = now_ms() + ms;
	long passes = 0;
	while (writeback_age > 0 && next_wake_ms <= to) {
		advanced_ms = next_wake_ms - mono0_ms;
		int64_t due = MIN(writeback_pass(), next_wake_ms) + wb_age;
		passes++;
		next_wake_ms += wb_every;
		if (due > next_wake_ms)
			next_wake_ms += (due - next_wake_ms + wb_every - 1) / wb_every * wb_every;
	}
	advanced_ms = to - mono0_ms;
	logmsg("ctl advance: %lld ms, to %lld ms after start (%ld writeback passes)", (long long)ms,
	       (long long)(to - mono0_ms), passes);
}

/* ---- main ---- */

struct ino_key {
	dev_t dev;
	ino_t ino;
	off_t size;
};
static struct ino_key *links; /* regular files with several names, met by the walk */
static size_t nlinks, caplinks;

static int count_file(const char *path, const struct stat *st, int type, struct FTW *ftw) {
	(void)path, (void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (st->st_nlink == 1) {
		used_bytes += st->st_size;
		return 0;
	}
	if (nlinks == caplinks) { /* each inode once: counted after the walk */
		struct ino_key *k = realloc(links, (caplinks ? 2 * caplinks : 64) * sizeof *links);
		if (!k)
			return -1;
		links = k, caplinks = caplinks ? 2 * caplinks : 64;
	}
	links[nlinks++] = (struct ino_key){ st->st_dev, st->st_ino, st->st_size };
	return 0;
}

static int by_ino(const void *a, const void *b) {
	const struct ino_key *x = a, *y = b;
	return x->dev != y->dev ? (x->dev < y->dev ? -1 : 1) : x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* used_bytes at start: the apparent size of every regular file under the backing directory. */
static void count_used(const char *root) {
	if (nftw(root, count_file, 64, FTW_PHYS | FTW_MOUNT) != 0)
		logmsg("start: counting the used bytes of %s failed: %s", root, strerror(errno));
	if (nlinks)
		qsort(links, nlinks, sizeof *links, by_ino);
	for (size_t i = 0; i < nlinks; i++)
		if (!i || by_ino(&links[i - 1], &links[i]))
			used_bytes += links[i].size;
	free(links);
	links = NULL, nlinks = caplinks = 0;
}

static void die(const char *fmt, ...) {
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (logf_)
		logmsg("fatal: %s", msg);
	fprintf(stderr, "lazyfs: %s\n", msg);
	exit(2);
}

#define USAGE "usage: lazyfs [--ctl=FIFO] [--log=FILE] [--writeback-age=SECONDS] [--writeback-interval=SECONDS] [--manual-clock] [-o OPTS] BACKING_DIR MOUNTPOINT"

/* "--name=value" or "--name value" */
static const char *optval(int argc, char **argv, int *i, const char *name) {
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) != 0 || (argv[*i][n] && argv[*i][n] != '='))
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (*i + 1 >= argc)
		die("%s needs a value; " USAGE, name);
	return argv[++*i];
}

int main(int argc, char **argv) {
	const char *pos[2], *v, *logpath = NULL;
	char opts[4096] = "fsname=lazyfs,subtype=lazyfs", *end;
	int npos = 0, debug = 0;
	bool manual = false;
	for (int i = 1; i < argc; i++) {
		if ((v = optval(argc, argv, &i, "--ctl"))) {
			ctl_path = v;
		} else if ((v = optval(argc, argv, &i, "--log"))) {
			logpath = v;
		} else if ((v = optval(argc, argv, &i, "--writeback-age"))) {
			writeback_age = strtod(v, &end);
			if (*end || end == v || !(writeback_age >= 0))
				die("bad --writeback-age %s: want seconds", v);
		} else if ((v = optval(argc, argv, &i, "--writeback-interval"))) {
			writeback_interval = strtod(v, &end);
			if (*end || end == v || !(writeback_interval >= 0) || writeback_interval > 86400)
				die("bad --writeback-interval %s: want seconds", v);
		} else if (strcmp(argv[i], "--manual-clock") == 0) {
			manual = true;
		} else if (strncmp(argv[i], "-o", 2) == 0) {
			v = argv[i][2] ? argv[i] + 2 : i + 1 < argc ? argv[++i] : NULL;
			if (!v || strlen(opts) + strlen(v) + 2 > sizeof opts)
				die("bad -o; " USAGE);
			strcat(strcat(opts, ","), v);
		} else if (strcmp(argv[i], "-d") == 0 || strcmp(argv[i], "-f") == 0) {
			debug |= argv[i][1] == 'd'; /* -f: we always run in the foreground */
		} else if (argv[i][0] == '-' || npos == 2) {
			die("unexpected argument %s; " USAGE, argv[i]);
		} else {
			pos[npos++] = argv[i];
		}
	}
	if (npos != 2)
		die(USAGE);
	if (manual && !ctl_path)
		die("--manual-clock needs --ctl: only `advance` moves the clock");
	wb_age = (int64_t)(writeback_age * 1000);
	wb_every = writeback_interval > 0 ? MAX(1, (int64_t)(writeback_interval * 1000)) : MIN(1000, wb_age / 4 > 50 ? wb_age / 4 : 50);
	if (manual) /* it starts at the real time */
		mono0_ms = now_ms(), wall0_ms = wall_ms(), next_wake_ms = mono0_ms + wb_every, manual_clock = true;
	if (logpath && !(logf_ = fopen(logpath, "a")))
		die("cannot open log %s: %s", logpath, strerror(errno));
	umask(0); /* the kernel has applied the caller's umask to the modes it sends */
	if ((rootfd = open(pos[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || !(root_path = realpath(pos[0], NULL)))
		die("backing dir %s: %s", pos[0], strerror(errno));
	struct stat st;
	if (stat(pos[1], &st) < 0 && errno == ENOTCONN) { /* a killed lazyfs left its mount behind */
		logmsg("detaching the dead mount on %s", pos[1]);
		umount2(pos[1], MNT_DETACH);
	}
	errno = 0;
	if (stat(pos[1], &st) < 0 || !S_ISDIR(st.st_mode))
		die("mountpoint %s: %s", pos[1], errno ? strerror(errno) : "not a directory");
	struct rlimit rl; /* an fd per open or dirty file, and Kafka keeps many */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (ctl_path && ((unlink(ctl_path) < 0 && errno != ENOENT) || mkfifo(ctl_path, 0600) < 0))
		die("control fifo %s: %s", ctl_path, strerror(errno));
	count_used(root_path);
	logmsg("start: backing=%s mountpoint=%s ctl=%s writeback-age=%gs writeback-interval=%gs%s options=%s used=%lld",
	       pos[0], pos[1], ctl_path ? ctl_path : "-", writeback_age, writeback_interval,
	       manual_clock ? " manual-clock" : "", opts, (long long)used_bytes);

	fuse_set_log_func(fuse_logger);
	char *fargv[] = { argv[0], "-o", opts, "-d", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, fargv);
	struct fuse *f = fuse_new(&args, &ops, sizeof ops, NULL);
	if (!f)
		die("bad FUSE options: %s", opts);
	if (fuse_mount(f, pos[1]) != 0)
		die("mount on %s failed", pos[1]);
	if (fuse_set_signal_handlers(fuse_get_session(f)) != 0)
		die("cannot install signal handlers");
	pthread_t t;
	if (ctl_path && pthread_create(&t, NULL, ctl_thread, NULL) != 0)
		die("cannot start the control thread");
	if (writeback_age > 0 && !manual_clock && pthread_create(&t, NULL, writeback_thread, NULL) != 0)
		die("cannot start the writeback thread");
	logmsg("mounted %s on %s", pos[0], pos[1]);
	/* libfuse's default of 10 workers would let a few delayed fsyncs stall every request */
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(lc, 64);
	int rc = fuse_loop_mt(f, lc); /* > 0: the signal that ended it */
	fuse_loop_cfg_destroy(lc);
	fuse_remove_signal_handlers(fuse_get_session(f));
	fuse_unmount(f);
	fuse_destroy(f); /* calls fs_destroy: everything is written back */
	if (rc > 0)
		logmsg("exit: unmounted on signal %d", rc);
	else
		logmsg("exit: %s", rc ? "the FUSE loop failed" : "unmounted");
	if (ctl_path)
		unlink(ctl_path);
	return rc < 0;
}
