/* A power-cut recorder, preloaded (LD_PRELOAD) into a process under test.
 *
 * For every write to a file under $POWERCUT_ROOT it appends an undo record to $POWERCUT_JOURNAL
 * (the bytes the write is about to replace, and the file's size before it), and for every
 * successful fsync/fdatasync a sync record. After the process is killed, the test replays the
 * journal: every byte written after a file's last sync is dropped (the undo records applied in
 * reverse) or zero-filled, as a power cut may leave it. Built by the crash test with the system C
 * compiler; nothing in the library uses it.
 *
 * Record layout (little-endian): 'U' u32 path_len, path, i64 offset, i64 written, i64 old_size,
 * i64 old_len, old bytes — or 'S' u32 path_len, path.
 *
 * Each record is appended with one write() on an O_APPEND descriptor, so several processes (a
 * host and a front end handing a session over) can share one journal: their records never
 * interleave, and the journal's order is the order of their writes and syncs.
 *
 * With $POWERCUT_KILL_AFTER set to N > 0, the process SIGKILLs itself as soon as the write or
 * sync of its Nth record has been done: a kill at an exact point of its I/O.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int journal = -1;
static const char *root;
static long records_made, kill_after;

/* A record being built, appended to the journal whole by commit(). */
static char *record;
static size_t record_len, record_cap;

static void put(const void *data, size_t size) {
    if (record_len + size > record_cap) {
        size_t cap = record_cap ? record_cap : 4096;
        while (cap < record_len + size) cap *= 2;
        char *grown = realloc(record, cap);
        if (grown == NULL) abort();
        record = grown;
        record_cap = cap;
    }
    memcpy(record + record_len, data, size);
    record_len += size;
}

static void commit(void) {
    /* One write: a short write to a regular file means the disk is full, and a journal that
     * cannot be written makes the whole run meaningless. */
    ssize_t n;
    do {
        n = syscall(SYS_write, journal, record, record_len);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)record_len) abort();
    record_len = 0;
    records_made++;
}

/* Called once the operation of the latest record is done (the lock still held, so no other
 * thread's write follows it). */
static void maybe_killed(void) {
    if (kill_after > 0 && records_made >= kill_after) syscall(SYS_kill, getpid(), SIGKILL);
}

static int tracked(int fd, char *path, size_t size) {
    if (journal < 0) {
        const char *name = getenv("POWERCUT_JOURNAL");
        root = getenv("POWERCUT_ROOT");
        if (name == NULL || root == NULL) return 0;
        journal = (int)syscall(SYS_openat, AT_FDCWD, name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (journal < 0) abort();
        const char *after = getenv("POWERCUT_KILL_AFTER");
        kill_after = after != NULL ? strtol(after, NULL, 10) : 0;
    }
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, size - 1);
    if (n <= 0) return 0;
    path[n] = '\0';
    return strncmp(path, root, strlen(root)) == 0;
}

static void record_sync(const char *path) {
    uint32_t len = (uint32_t)strlen(path);
    put("S", 1);
    put(&len, sizeof len);
    put(path, len);
    commit();
}

static void record_undo(int fd, const char *path, int64_t offset, int64_t written) {
    struct stat st;
    if (fstat(fd, &st) != 0) abort();
    int64_t old_size = st.st_size;
    int64_t end = offset + written;
    if (written == 0) end = old_size; /* a truncation: keep what it cuts */
    int64_t old_len = end > old_size ? old_size - offset : end - offset;
    if (old_len < 0) old_len = 0;
    char *old = malloc(old_len > 0 ? (size_t)old_len : 1);
    if (old == NULL) abort();
    int64_t got = 0;
    while (got < old_len) {
        ssize_t n = pread(fd, old + got, (size_t)(old_len - got), offset + got);
        if (n <= 0) abort();
        got += n;
    }
    uint32_t len = (uint32_t)strlen(path);
    put("U", 1);
    put(&len, sizeof len);
    put(path, len);
    put(&offset, sizeof offset);
    put(&written, sizeof written);
    put(&old_size, sizeof old_size);
    put(&old_len, sizeof old_len);
    put(old, (size_t)old_len);
    commit();
    free(old);
}

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    char path[4096];
    if (count == 0 || !tracked(fd, path, sizeof path)) return real_write(fd, buf, count);
    pthread_mutex_lock(&lock);
    int flags = fcntl(fd, F_GETFL);
    off_t offset;
    if (flags >= 0 && (flags & O_APPEND)) {
        struct stat st;
        offset = fstat(fd, &st) == 0 ? st.st_size : 0;
    } else {
        offset = lseek(fd, 0, SEEK_CUR);
    }
    record_undo(fd, path, offset, (int64_t)count);
    ssize_t n = real_write(fd, buf, count);
    maybe_killed();
    pthread_mutex_unlock(&lock);
    return n;
}

static ssize_t positioned(ssize_t (*real)(int, const void *, size_t, off_t), int fd, const void *buf, size_t count, off_t offset) {
    char path[4096];
    if (count == 0 || !tracked(fd, path, sizeof path)) return real(fd, buf, count, offset);
    pthread_mutex_lock(&lock);
    record_undo(fd, path, offset, (int64_t)count);
    ssize_t n = real(fd, buf, count, offset);
    maybe_killed();
    pthread_mutex_unlock(&lock);
    return n;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite);
    return positioned(real_pwrite, fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite64);
    return positioned(real_pwrite64, fd, buf, count, offset);
}

static int truncated(int (*real)(int, off_t), int fd, off_t length) {
    char path[4096];
    if (!tracked(fd, path, sizeof path)) return real(fd, length);
    pthread_mutex_lock(&lock);
    record_undo(fd, path, length, 0);
    int result = real(fd, length);
    maybe_killed();
    pthread_mutex_unlock(&lock);
    return result;
}

int ftruncate(int fd, off_t length) {
    REAL(ftruncate);
    return truncated(real_ftruncate, fd, length);
}

int ftruncate64(int fd, off_t length) {
    REAL(ftruncate64);
    return truncated(real_ftruncate64, fd, length);
}

static int synced(int (*real)(int), int fd) {
    char path[4096];
    if (!tracked(fd, path, sizeof path)) return real(fd);
    pthread_mutex_lock(&lock);
    int result = real(fd);
    if (result == 0) {
        record_sync(path);
        maybe_killed();
    }
    pthread_mutex_unlock(&lock);
    return result;
}

int fsync(int fd) {
    REAL(fsync);
    return synced(real_fsync, fd);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    return synced(real_fdatasync, fd);
}
