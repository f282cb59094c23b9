#ifndef CLARDER_SQLITE_VFS_H
#define CLARDER_SQLITE_VFS_H

#include <sqlite3.h>
#include <stdint.h>

/// The name of Larder's SQLite VFS, registered on the first call (not as the default VFS);
/// NULL when it could not be registered (connections then open with SQLite's default VFS).
///
/// The VFS is the default one with a single change: the frames a commit appends to a
/// write-ahead log are gathered in memory and reach the log file in one write, before the
/// commit is published in the wal-index, instead of with two writes per frame. Files other
/// than logs, and every other operation, go to the default VFS unchanged; the bytes, their
/// order and the locking protocol are SQLite's own, so connections of other VFSes and other
/// processes share the database as before.
const char *larder_sqlite_vfs_name(void);

/// What a log file opened through the VFS went through, for tests: `calls` counts the writes
/// SQLite asked for, `writes` those that reached the default VFS, `directWrites` the writes among
/// them that went straight to the file (rewrites of frames, and writes too large to gather).
typedef struct {
    uint64_t calls;
    uint64_t writes;
    uint64_t directWrites;
} larder_sqlite_vfs_counts;

/// The counts of the log of `db`'s main database; 0 when that log is not open through the
/// VFS (the connection has not opened it yet, or opened it with another VFS), else 1. Call it
/// on the thread that owns the connection.
int larder_sqlite_vfs_log_counts(sqlite3 *db, larder_sqlite_vfs_counts *out);

#endif
