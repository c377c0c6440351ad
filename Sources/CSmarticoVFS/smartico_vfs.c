// A VFS that passes everything to SQLite's default VFS, except that writes to the WAL and to the
// main database file are gathered. SQLite writes each WAL frame as two calls (the 24-byte frame
// header, then the page), all at consecutive offsets, and syncs at the end of each commit; a
// checkpoint writes the database's pages one call each, in page order (runs of ~100 consecutive
// pages in the saturation benchmark), then syncs. Here consecutive writes are copied into a
// 64 KiB buffer and reach the file as one write when the buffer is full, when a write is not
// contiguous, or before any other operation on the file (sync, read, truncate, size, lock, file
// control, shared-memory lock or barrier, close). So a one-engagement commit (~4.5 frames, 9
// writes) is one write plus its sync, a checkpoint one write per 16 pages, and nothing can
// observe the file without seeing every byte written before.
//
// Sound only when every commit syncs the WAL (synchronous = FULL or EXTRA, which the store sets
// and checks): SQLite makes a commit's frames visible to other connections (the wal-index) only
// after that sync, and the sync writes the buffer first. With synchronous = NORMAL a commit does
// not sync and its frames could still be in the buffer when another connection reads them.
// A checkpoint's pages are read by other connections from the database file only once the
// wal-index says they were copied (nBackfill), which SQLite updates after the file control
// SQLITE_FCNTL_CKPT_DONE and the sync, under shared-memory locks: each of those writes the buffer.
//
// A failed write of the buffer is kept and returned by the next sync even when the operation that
// wrote the buffer cannot report it (SQLite ignores the result of CKPT_DONE, shared-memory
// barriers return nothing): a commit or checkpoint never succeeds over lost bytes.
#include "smartico_vfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

enum { GATHER_BYTES = 64 * 1024 };

typedef struct {
    sqlite3_file base;   // our methods
    sqlite3_file *real;  // the default VFS's file, in the memory right after this struct
    int gathers;            // the WAL or the main database file
    int failed;             // a write of the buffer that failed and was not reported yet (SQLite code)
    unsigned char *buffer;  // GATHER_BYTES, allocated at the first gathered write
    int length;             // bytes waiting in `buffer`
    sqlite3_int64 offset;   // where they go
} GatherFile;

static sqlite3_vfs *realVFS;
static sqlite3_vfs gatherVFS;

static int flushBuffer(GatherFile *f) {
    if (f->length == 0) return SQLITE_OK;
    int length = f->length;
    f->length = 0;
    int rc = f->real->pMethods->xWrite(f->real, f->buffer, length, f->offset);
    if (rc != SQLITE_OK && f->failed == SQLITE_OK) f->failed = rc;
    return rc;
}

#define FLUSH_OR_RETURN(f) do { int flushed = flushBuffer(f); if (flushed != SQLITE_OK) return flushed; } while (0)
#define REAL(file) (((GatherFile *)(file))->real)

static int gatherClose(sqlite3_file *file) {
    GatherFile *f = (GatherFile *)file;
    int flushed = flushBuffer(f);
    int closed = f->real->pMethods->xClose(f->real);
    free(f->buffer);
    f->buffer = NULL;
    return flushed != SQLITE_OK ? flushed : closed;
}

static int gatherRead(sqlite3_file *file, void *out, int amount, sqlite3_int64 offset) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xRead(REAL(file), out, amount, offset);
}

static int gatherWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
    GatherFile *f = (GatherFile *)file;
    if (!f->gathers) return f->real->pMethods->xWrite(f->real, data, amount, offset);
    if (f->length > 0 && offset == f->offset + f->length && f->length + amount <= GATHER_BYTES) {
        memcpy(f->buffer + f->length, data, (size_t)amount);
        f->length += amount;
        return SQLITE_OK;
    }
    FLUSH_OR_RETURN(f);
    if (amount > GATHER_BYTES) return f->real->pMethods->xWrite(f->real, data, amount, offset);
    if (!f->buffer && !(f->buffer = malloc(GATHER_BYTES))) {
        return f->real->pMethods->xWrite(f->real, data, amount, offset);
    }
    memcpy(f->buffer, data, (size_t)amount);
    f->length = amount;
    f->offset = offset;
    return SQLITE_OK;
}

static int gatherTruncate(sqlite3_file *file, sqlite3_int64 size) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int gatherSync(sqlite3_file *file, int flags) {
    GatherFile *f = (GatherFile *)file;
    flushBuffer(f);
    if (f->failed != SQLITE_OK) {
        int failed = f->failed;
        f->failed = SQLITE_OK;  // reported: what SQLite writes after this is a new attempt
        return failed;
    }
    return f->real->pMethods->xSync(f->real, flags);
}

static int gatherFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int gatherLock(sqlite3_file *file, int level) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xLock(REAL(file), level);
}

static int gatherUnlock(sqlite3_file *file, int level) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xUnlock(REAL(file), level);
}

static int gatherCheckReservedLock(sqlite3_file *file, int *result) {
    return REAL(file)->pMethods->xCheckReservedLock(REAL(file), result);
}

static int gatherFileControl(sqlite3_file *file, int op, void *arg) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xFileControl(REAL(file), op, arg);
}

static int gatherSectorSize(sqlite3_file *file) {
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int gatherDeviceCharacteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int gatherShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    return REAL(file)->pMethods->xShmMap(REAL(file), region, size, extend, out);
}

// The wal-index lives in shared memory opened through the main database file: before it changes
// or is unlocked, the file holds every byte written (a failure is reported by the next sync).
static int gatherShmLock(sqlite3_file *file, int offset, int n, int flags) {
    flushBuffer((GatherFile *)file);
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}

static void gatherShmBarrier(sqlite3_file *file) {
    flushBuffer((GatherFile *)file);
    REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int gatherShmUnmap(sqlite3_file *file, int deleteFlag) {
    return REAL(file)->pMethods->xShmUnmap(REAL(file), deleteFlag);
}

static int gatherFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
    FLUSH_OR_RETURN((GatherFile *)file);
    return REAL(file)->pMethods->xFetch(REAL(file), offset, amount, out);
}

static int gatherUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
    return REAL(file)->pMethods->xUnfetch(REAL(file), offset, page);
}

// Version 3 methods; used only over a real file whose methods are version 3 too (checked in
// gatherOpen), so every call above has its target.
static const sqlite3_io_methods gatherMethods = {
    3,
    gatherClose, gatherRead, gatherWrite, gatherTruncate, gatherSync, gatherFileSize,
    gatherLock, gatherUnlock, gatherCheckReservedLock, gatherFileControl,
    gatherSectorSize, gatherDeviceCharacteristics,
    gatherShmMap, gatherShmLock, gatherShmBarrier, gatherShmUnmap,
    gatherFetch, gatherUnfetch,
};

static int gatherOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)vfs;
    GatherFile *f = (GatherFile *)file;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    int rc = realVFS->xOpen(realVFS, name, f->real, flags, outFlags);
    if (rc != SQLITE_OK || !f->real->pMethods) {
        f->base.pMethods = NULL;
        return rc;
    }
    if (f->real->pMethods->iVersion < 3) {
        // Not a file we can wrap with version 3 methods: close it and refuse.
        f->real->pMethods->xClose(f->real);
        f->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    f->gathers = (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_DB)) != 0;
    f->base.pMethods = &gatherMethods;
    return SQLITE_OK;
}

static int gatherDelete(sqlite3_vfs *v, const char *n, int s) { (void)v; return realVFS->xDelete(realVFS, n, s); }
static int gatherAccess(sqlite3_vfs *v, const char *n, int f, int *r) { (void)v; return realVFS->xAccess(realVFS, n, f, r); }
static int gatherFullPathname(sqlite3_vfs *v, const char *n, int k, char *o) { (void)v; return realVFS->xFullPathname(realVFS, n, k, o); }
static void *gatherDlOpen(sqlite3_vfs *v, const char *n) { (void)v; return realVFS->xDlOpen(realVFS, n); }
static void gatherDlError(sqlite3_vfs *v, int k, char *o) { (void)v; realVFS->xDlError(realVFS, k, o); }
static void (*gatherDlSym(sqlite3_vfs *v, void *h, const char *s))(void) { (void)v; return realVFS->xDlSym(realVFS, h, s); }
static void gatherDlClose(sqlite3_vfs *v, void *h) { (void)v; realVFS->xDlClose(realVFS, h); }
static int gatherRandomness(sqlite3_vfs *v, int k, char *o) { (void)v; return realVFS->xRandomness(realVFS, k, o); }
static int gatherSleep(sqlite3_vfs *v, int us) { (void)v; return realVFS->xSleep(realVFS, us); }
static int gatherCurrentTime(sqlite3_vfs *v, double *t) { (void)v; return realVFS->xCurrentTime(realVFS, t); }
static int gatherGetLastError(sqlite3_vfs *v, int k, char *o) { (void)v; return realVFS->xGetLastError(realVFS, k, o); }
static int gatherCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *t) { (void)v; return realVFS->xCurrentTimeInt64(realVFS, t); }

static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void registerOnce(void) {
    realVFS = sqlite3_vfs_find(NULL);
    if (!realVFS || realVFS->iVersion < 2 || !realVFS->xCurrentTimeInt64) {
        registered = SQLITE_ERROR;
        return;
    }
    memset(&gatherVFS, 0, sizeof gatherVFS);
    gatherVFS.iVersion = 2;
    gatherVFS.szOsFile = (int)sizeof(GatherFile) + realVFS->szOsFile;
    gatherVFS.mxPathname = realVFS->mxPathname;
    gatherVFS.zName = SMARTICO_VFS_NAME;
    gatherVFS.xOpen = gatherOpen;
    gatherVFS.xDelete = gatherDelete;
    gatherVFS.xAccess = gatherAccess;
    gatherVFS.xFullPathname = gatherFullPathname;
    gatherVFS.xDlOpen = gatherDlOpen;
    gatherVFS.xDlError = gatherDlError;
    gatherVFS.xDlSym = gatherDlSym;
    gatherVFS.xDlClose = gatherDlClose;
    gatherVFS.xRandomness = gatherRandomness;
    gatherVFS.xSleep = gatherSleep;
    gatherVFS.xCurrentTime = gatherCurrentTime;
    gatherVFS.xGetLastError = gatherGetLastError;
    gatherVFS.xCurrentTimeInt64 = gatherCurrentTimeInt64;
    registered = sqlite3_vfs_register(&gatherVFS, 0);
}

int smartico_vfs_register(void) {
    pthread_once(&once, registerOnce);
    return registered;
}
