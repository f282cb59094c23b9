// Larder's SQLite VFS: the default VFS, with the frames a commit appends to a write-ahead log
// gathered into one write. See include/CLarderSQLiteVFS.h.
//
// Why: SQLite writes each log frame with two `pwrite`s (its 24-byte header, then the page),
// and a small commit of Larder's index appends 4 to 9 frames, so 8 to 18 system calls, each
// paying the file system's per-call cost. One write of the same bytes costs one.
//
// The one rule that matters: the frames of a commit must be in the file before any other
// connection can see the commit. SQLite publishes a commit by writing the wal-index header
// after `sqlite3WalFrames` has written every frame; the last frame of a commit is the one
// whose header carries a non-zero database size ("commit frame", https://www.sqlite.org/
// fileformat2.html#walformat). So the gathered bytes are written as soon as the commit
// frame's page has been appended, inside that write call, whose error SQLite then sees as
// its own. Anything else done to the log (a read, a size, a sync, a truncate, a file control,
// a close) writes the gathered bytes first, and a write that is not an append (SQLite
// rewriting frames of the transaction under way, `walRewriteChecksums`) goes to the file
// directly after them, so the file always holds what SQLite would have written, in order.

#include "CLarderSQLiteVFS.h"

#include <sqlite3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct LogFile {
    sqlite3_file base;
    /// The default VFS's file, in the same allocation, right after this struct.
    sqlite3_file *real;
    unsigned char *buffer;
    int used;
    /// File offset of buffer[0].
    sqlite3_int64 start;
    /// The end of the furthest write since the log last started over (a write at offset 0,
    /// the log header): a write below it that does not extend the buffer is a rewrite.
    sqlite3_int64 highWater;
    /// The last write appended was a commit frame's header: its page comes next.
    int commitPending;
    larder_sqlite_vfs_counts counts;
} LogFile;

// The default (unix) VFS writes at most 128 KiB - 1 bytes per call (it masks the length to 17
// bits and reports a shorter write as a full disk): gathered writes stay well below.
enum { BUFFER_CAPACITY = 64 * 1024, FRAME_HEADER_SIZE = 24 };

static sqlite3_vfs larderVFS;
static sqlite3_vfs *defaultVFS;
static const char *registeredName;
static pthread_once_t registration = PTHREAD_ONCE_INIT;

static int flushLog(LogFile *log) {
    if (log->used == 0) return SQLITE_OK;
    int count = log->used;
    log->used = 0;
    log->counts.writes += 1;
    return log->real->pMethods->xWrite(log->real, log->buffer, count, log->start);
}

static int writeDirectly(LogFile *log, const void *data, int count, sqlite3_int64 offset) {
    if (offset + count > log->highWater) log->highWater = offset + count;
    log->counts.writes += 1;
    log->counts.directWrites += 1;
    return log->real->pMethods->xWrite(log->real, data, count, offset);
}

/// Whether `data` is a log frame header of a commit: 24 bytes whose second big-endian word,
/// the database size after the commit, is not zero.
static int isCommitFrameHeader(const void *data, int count) {
    if (count != FRAME_HEADER_SIZE) return 0;
    const unsigned char *bytes = data;
    return (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
}

static int logWrite(sqlite3_file *file, const void *data, int count, sqlite3_int64 offset) {
    LogFile *log = (LogFile *)file;
    log->counts.calls += 1;
    // Whether this is the page of a commit frame whose header was the last write: once it is
    // written, so is every frame of the commit.
    int isCommitPage = log->commitPending;
    log->commitPending = 0;
    int extendsBuffer = log->used > 0 && offset == log->start + log->used;
    if (!extendsBuffer) {
        int code = flushLog(log);
        if (code != SQLITE_OK) return code;
        if (offset == 0) log->highWater = 0;  // a new log header: the log starts over
        if (offset < log->highWater) return writeDirectly(log, data, count, offset);
    }
    if (count > BUFFER_CAPACITY - log->used) {
        int code = flushLog(log);
        if (code != SQLITE_OK) return code;
        if (count >= BUFFER_CAPACITY) return writeDirectly(log, data, count, offset);
    }
    if (log->buffer == NULL) {
        log->buffer = malloc(BUFFER_CAPACITY);
        if (log->buffer == NULL) return writeDirectly(log, data, count, offset);
    }
    if (log->used == 0) log->start = offset;
    memcpy(log->buffer + log->used, data, (size_t)count);
    log->used += count;
    if (offset + count > log->highWater) log->highWater = offset + count;
    // The commit frame's page: every frame of the commit is now gathered; write them before
    // SQLite goes on to publish the commit.
    if (isCommitPage) return flushLog(log);
    log->commitPending = isCommitFrameHeader(data, count);
    return SQLITE_OK;
}

// Every other method writes what is gathered first, then does what the default VFS does.
#define REAL(log) ((LogFile *)(log))->real

static int logClose(sqlite3_file *file) {
    LogFile *log = (LogFile *)file;
    int flushed = flushLog(log);
    free(log->buffer);
    log->buffer = NULL;
    int closed = log->real->pMethods->xClose(log->real);
    return flushed != SQLITE_OK ? flushed : closed;
}

static int logRead(sqlite3_file *file, void *data, int count, sqlite3_int64 offset) {
    int code = flushLog((LogFile *)file);
    return code != SQLITE_OK ? code : REAL(file)->pMethods->xRead(REAL(file), data, count, offset);
}

static int logTruncate(sqlite3_file *file, sqlite3_int64 size) {
    int code = flushLog((LogFile *)file);
    if (code != SQLITE_OK) return code;
    if (size < ((LogFile *)file)->highWater) ((LogFile *)file)->highWater = size;
    return REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int logSync(sqlite3_file *file, int flags) {
    int code = flushLog((LogFile *)file);
    return code != SQLITE_OK ? code : REAL(file)->pMethods->xSync(REAL(file), flags);
}

static int logFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    int code = flushLog((LogFile *)file);
    return code != SQLITE_OK ? code : REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int logLock(sqlite3_file *file, int level) {
    return REAL(file)->pMethods->xLock(REAL(file), level);
}

static int logUnlock(sqlite3_file *file, int level) {
    return REAL(file)->pMethods->xUnlock(REAL(file), level);
}

static int logCheckReservedLock(sqlite3_file *file, int *result) {
    return REAL(file)->pMethods->xCheckReservedLock(REAL(file), result);
}

static int logFileControl(sqlite3_file *file, int operation, void *argument) {
    int code = flushLog((LogFile *)file);
    return code != SQLITE_OK ? code : REAL(file)->pMethods->xFileControl(REAL(file), operation, argument);
}

static int logSectorSize(sqlite3_file *file) {
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int logDeviceCharacteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

// SQLite never maps a log file or asks it for shared memory; these answer as a VFS without
// either would.
static int logShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    (void)file; (void)region; (void)size; (void)extend;
    *out = NULL;
    return SQLITE_IOERR_SHMMAP;
}

static int logShmLock(sqlite3_file *file, int offset, int count, int flags) {
    (void)file; (void)offset; (void)count; (void)flags;
    return SQLITE_IOERR_SHMLOCK;
}

static void logShmBarrier(sqlite3_file *file) {
    (void)file;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static int logShmUnmap(sqlite3_file *file, int delete) {
    (void)file; (void)delete;
    return SQLITE_OK;
}

static int logFetch(sqlite3_file *file, sqlite3_int64 offset, int count, void **out) {
    (void)file; (void)offset; (void)count;
    *out = NULL;
    return SQLITE_OK;
}

static int logUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    (void)file; (void)offset; (void)pointer;
    return SQLITE_OK;
}

static const sqlite3_io_methods logMethods = {
    3,
    logClose, logRead, logWrite, logTruncate, logSync, logFileSize,
    logLock, logUnlock, logCheckReservedLock, logFileControl, logSectorSize, logDeviceCharacteristics,
    logShmMap, logShmLock, logShmBarrier, logShmUnmap,
    logFetch, logUnfetch,
};

static int larderOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)vfs;
    // Not a log: the default VFS's file, as it is, in the space this VFS asked for.
    if ((flags & SQLITE_OPEN_WAL) == 0) return defaultVFS->xOpen(defaultVFS, name, file, flags, outFlags);
    LogFile *log = (LogFile *)file;
    memset(log, 0, sizeof(*log));
    log->real = (sqlite3_file *)(log + 1);
    int code = defaultVFS->xOpen(defaultVFS, name, log->real, flags, outFlags);
    if (code != SQLITE_OK) {
        if (log->real->pMethods != NULL) log->real->pMethods->xClose(log->real);
        log->base.pMethods = NULL;
        return code;
    }
    log->base.pMethods = &logMethods;
    return SQLITE_OK;
}

// The rest of the VFS is the default one's.
static int larderDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    return defaultVFS->xDelete(defaultVFS, name, syncDirectory);
}

static int larderAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return defaultVFS->xAccess(defaultVFS, name, flags, result);
}

static int larderFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return defaultVFS->xFullPathname(defaultVFS, name, size, out);
}

static void *larderDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return defaultVFS->xDlOpen(defaultVFS, name);
}

static void larderDlError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    defaultVFS->xDlError(defaultVFS, size, out);
}

static void (*larderDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return defaultVFS->xDlSym(defaultVFS, library, symbol);
}

static void larderDlClose(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    defaultVFS->xDlClose(defaultVFS, library);
}

static int larderRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return defaultVFS->xRandomness(defaultVFS, size, out);
}

static int larderSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return defaultVFS->xSleep(defaultVFS, microseconds);
}

static int larderCurrentTime(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return defaultVFS->xCurrentTime(defaultVFS, out);
}

static int larderGetLastError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return defaultVFS->xGetLastError ? defaultVFS->xGetLastError(defaultVFS, size, out) : 0;
}

static int larderCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    return defaultVFS->xCurrentTimeInt64(defaultVFS, out);
}

static void registerVFS(void) {
    if (sqlite3_initialize() != SQLITE_OK) return;
    defaultVFS = sqlite3_vfs_find(NULL);
    // The default VFS must have what this one passes through (unix's has version 3).
    if (defaultVFS == NULL || defaultVFS->iVersion < 2 || defaultVFS->xCurrentTimeInt64 == NULL) return;
    larderVFS = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(LogFile) + defaultVFS->szOsFile,
        .mxPathname = defaultVFS->mxPathname,
        .zName = "larder",
        .xOpen = larderOpen, .xDelete = larderDelete, .xAccess = larderAccess,
        .xFullPathname = larderFullPathname, .xDlOpen = larderDlOpen, .xDlError = larderDlError,
        .xDlSym = larderDlSym, .xDlClose = larderDlClose, .xRandomness = larderRandomness,
        .xSleep = larderSleep, .xCurrentTime = larderCurrentTime, .xGetLastError = larderGetLastError,
        .xCurrentTimeInt64 = larderCurrentTimeInt64,
    };
    if (sqlite3_vfs_register(&larderVFS, 0) == SQLITE_OK) registeredName = larderVFS.zName;
}

const char *larder_sqlite_vfs_name(void) {
    pthread_once(&registration, registerVFS);
    return registeredName;
}

int larder_sqlite_vfs_log_counts(sqlite3 *db, larder_sqlite_vfs_counts *out) {
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) != SQLITE_OK) return 0;
    if (file == NULL || file->pMethods != &logMethods) return 0;
    *out = ((LogFile *)file)->counts;
    return 1;
}
