// Larder's SQLite VFS: the default VFS, with the frames a commit appends to a write-ahead log
// gathered into one write, and a database page read together with the page after it. See
// include/CLarderSQLiteVFS.h.
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
//
// Reads: a value over two overflow pages of 2 KiB (a 4 KiB value in Larder's index) costs
// SQLite two `pread`s, one per page, and the pages of one chain usually follow each other in
// the file. So a read of one whole page of a main database reads the next page with it, and
// the next call on that file gets it if it reads exactly that page; any other call forgets it
// (see `settle`).

#include "CLarderSQLiteVFS.h"

#include <sqlite3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// Both kinds of file this VFS wraps start with the same two members.
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

typedef struct DbFile {
    sqlite3_file base;
    /// The default VFS's file, in the same allocation, right after this struct.
    sqlite3_file *real;
    /// Room for two pages. The page after the last page read, read with it, is its second
    /// half: the `aheadCount` bytes of the file at `aheadOffset` (none when 0), valid until the
    /// next call on the file of any kind.
    unsigned char *ahead;
    int aheadCapacity;
    int aheadCount;
    sqlite3_int64 aheadOffset;
    larder_sqlite_vfs_counts counts;
} DbFile;

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
        if (log->buffer == NULL) {
            // Nothing gathered, nothing to gather into: written as SQLite would, and a commit
            // frame's header still marks its page for the flush of anything gathered later.
            log->commitPending = isCommitFrameHeader(data, count);
            return writeDirectly(log, data, count, offset);
        }
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

/// Whether `count` bytes at `offset` are one whole database page (a power of two from 512
/// bytes, at a multiple of itself) that can be read with the next: two pages in one read of
/// at most 64 KiB (the default VFS takes at most 128 KiB - 1 bytes a call: it cuts longer
/// writes, and some versions longer reads).
static int isPageToReadAhead(int count, sqlite3_int64 offset) {
    return count >= 512 && count <= 32768 && (count & (count - 1)) == 0 && offset % count == 0;
}

static int dbRead(sqlite3_file *file, void *data, int count, sqlite3_int64 offset) {
    DbFile *db = (DbFile *)file;
    db->counts.reads += 1;
    int aheadCount = db->aheadCount;
    db->aheadCount = 0;
    if (aheadCount == count && db->aheadOffset == offset) {
        memcpy(data, db->ahead + count, (size_t)count);
        db->counts.readAheadHits += 1;
        return SQLITE_OK;
    }
    if (!isPageToReadAhead(count, offset)) return db->real->pMethods->xRead(db->real, data, count, offset);
    if (db->aheadCapacity < 2 * count) {
        unsigned char *buffer = realloc(db->ahead, 2 * (size_t)count);
        if (buffer == NULL) return db->real->pMethods->xRead(db->real, data, count, offset);
        db->ahead = buffer;
        db->aheadCapacity = 2 * count;
    }
    int code = db->real->pMethods->xRead(db->real, db->ahead, 2 * count, offset);
    // The file ends before the next page does: the page alone, as the default VFS reads it.
    if (code == SQLITE_IOERR_SHORT_READ) return db->real->pMethods->xRead(db->real, data, count, offset);
    if (code != SQLITE_OK) return code;
    memcpy(data, db->ahead, (size_t)count);
    db->aheadCount = count;
    db->aheadOffset = offset + count;
    return SQLITE_OK;
}

static int dbClose(sqlite3_file *file) {
    DbFile *db = (DbFile *)file;
    free(db->ahead);
    db->ahead = NULL;
    db->aheadCount = 0;
    return db->real->pMethods->xClose(db->real);
}

static int logClose(sqlite3_file *file) {
    LogFile *log = (LogFile *)file;
    int flushed = flushLog(log);
    free(log->buffer);
    log->buffer = NULL;
    int closed = log->real->pMethods->xClose(log->real);
    return flushed != SQLITE_OK ? flushed : closed;
}

static int logTruncate(sqlite3_file *file, sqlite3_int64 size);

// Every other method, on either kind of file, settles the file first (a log writes what it
// gathered; a database forgets the page it read ahead), then does what the default VFS does.
// So a page read ahead is served only to the read that comes next, with no lock, unlock,
// shared-memory call or write between: within one transaction, in which the database file's
// pages that SQLite reads from it cannot change (a checkpoint copies into the file only pages
// that every open read transaction reads from the log, and takes the lock of readers of the
// file alone first).
static const sqlite3_io_methods logMethods;

static int settle(sqlite3_file *file) {
    if (file->pMethods == &logMethods) return flushLog((LogFile *)file);
    ((DbFile *)file)->aheadCount = 0;
    return SQLITE_OK;
}

#define REAL(file) (((DbFile *)(file))->real)
#define SETTLED(file, call) do { int code = settle(file); return code != SQLITE_OK ? code : (call); } while (0)

static int passRead(sqlite3_file *file, void *data, int count, sqlite3_int64 offset) {
    SETTLED(file, REAL(file)->pMethods->xRead(REAL(file), data, count, offset));
}

static int passWrite(sqlite3_file *file, const void *data, int count, sqlite3_int64 offset) {
    SETTLED(file, REAL(file)->pMethods->xWrite(REAL(file), data, count, offset));
}

static int passTruncate(sqlite3_file *file, sqlite3_int64 size) {
    SETTLED(file, REAL(file)->pMethods->xTruncate(REAL(file), size));
}

static int passSync(sqlite3_file *file, int flags) {
    SETTLED(file, REAL(file)->pMethods->xSync(REAL(file), flags));
}

static int passFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    SETTLED(file, REAL(file)->pMethods->xFileSize(REAL(file), size));
}

static int passLock(sqlite3_file *file, int level) {
    SETTLED(file, REAL(file)->pMethods->xLock(REAL(file), level));
}

static int passUnlock(sqlite3_file *file, int level) {
    SETTLED(file, REAL(file)->pMethods->xUnlock(REAL(file), level));
}

static int passCheckReservedLock(sqlite3_file *file, int *result) {
    SETTLED(file, REAL(file)->pMethods->xCheckReservedLock(REAL(file), result));
}

static int passFileControl(sqlite3_file *file, int operation, void *argument) {
    SETTLED(file, REAL(file)->pMethods->xFileControl(REAL(file), operation, argument));
}

static int passSectorSize(sqlite3_file *file) {
    return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int passDeviceCharacteristics(sqlite3_file *file) {
    return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int passShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    SETTLED(file, REAL(file)->pMethods->xShmMap(REAL(file), region, size, extend, out));
}

static int passShmLock(sqlite3_file *file, int offset, int count, int flags) {
    SETTLED(file, REAL(file)->pMethods->xShmLock(REAL(file), offset, count, flags));
}

static void passShmBarrier(sqlite3_file *file) {
    (void)settle(file);  // only a database's: SQLite asks no log for shared memory
    REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int passShmUnmap(sqlite3_file *file, int delete) {
    SETTLED(file, REAL(file)->pMethods->xShmUnmap(REAL(file), delete));
}

static int passFetch(sqlite3_file *file, sqlite3_int64 offset, int count, void **out) {
    SETTLED(file, REAL(file)->pMethods->xFetch(REAL(file), offset, count, out));
}

static int passUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    SETTLED(file, REAL(file)->pMethods->xUnfetch(REAL(file), offset, pointer));
}

static int logTruncate(sqlite3_file *file, sqlite3_int64 size) {
    LogFile *log = (LogFile *)file;
    int code = flushLog(log);
    if (code != SQLITE_OK) return code;
    if (size < log->highWater) log->highWater = size;
    return log->real->pMethods->xTruncate(log->real, size);
}

static const sqlite3_io_methods logMethods = {
    3, logClose, passRead, logWrite, logTruncate, passSync, passFileSize,
    passLock, passUnlock, passCheckReservedLock, passFileControl, passSectorSize, passDeviceCharacteristics,
    passShmMap, passShmLock, passShmBarrier, passShmUnmap, passFetch, passUnfetch,
};

static const sqlite3_io_methods dbMethods = {
    3, dbClose, dbRead, passWrite, passTruncate, passSync, passFileSize,
    passLock, passUnlock, passCheckReservedLock, passFileControl, passSectorSize, passDeviceCharacteristics,
    passShmMap, passShmLock, passShmBarrier, passShmUnmap, passFetch, passUnfetch,
};

static int larderOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)vfs;
    const sqlite3_io_methods *methods = (flags & SQLITE_OPEN_WAL) ? &logMethods
        : (flags & SQLITE_OPEN_MAIN_DB) ? &dbMethods : NULL;
    // Neither a log nor a main database: the default VFS's file, as it is, in the space this
    // VFS asked for.
    if (methods == NULL) return defaultVFS->xOpen(defaultVFS, name, file, flags, outFlags);
    // Both kinds start with the file and the default VFS's file after the struct.
    size_t size = methods == &logMethods ? sizeof(LogFile) : sizeof(DbFile);
    memset(file, 0, size);
    sqlite3_file *real = (sqlite3_file *)((unsigned char *)file + size);
    if (methods == &logMethods) ((LogFile *)file)->real = real; else ((DbFile *)file)->real = real;
    int code = defaultVFS->xOpen(defaultVFS, name, real, flags, outFlags);
    if (code != SQLITE_OK) {
        if (real->pMethods != NULL) real->pMethods->xClose(real);
        file->pMethods = NULL;
        return code;
    }
    file->pMethods = methods;
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
        .szOsFile = (int)(sizeof(LogFile) > sizeof(DbFile) ? sizeof(LogFile) : sizeof(DbFile)) + defaultVFS->szOsFile,
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

int larder_sqlite_vfs_counts_of(sqlite3 *db, int log, larder_sqlite_vfs_counts *out) {
    sqlite3_file *file = NULL;
    int operation = log ? SQLITE_FCNTL_JOURNAL_POINTER : SQLITE_FCNTL_FILE_POINTER;
    if (sqlite3_file_control(db, "main", operation, &file) != SQLITE_OK || file == NULL) return 0;
    if (file->pMethods != (log ? &logMethods : &dbMethods)) return 0;
    *out = log ? ((LogFile *)file)->counts : ((DbFile *)file)->counts;
    return 1;
}
