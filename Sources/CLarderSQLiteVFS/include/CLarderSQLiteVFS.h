#ifndef CLARDER_SQLITE_VFS_H
#define CLARDER_SQLITE_VFS_H

#include <sqlite3.h>
#include <stdint.h>

/// The name of Larder's SQLite VFS, registered on the first call (not as the default VFS);
/// NULL when it could not be registered (connections then open with SQLite's default VFS).
///
/// The VFS is the default one with two changes. The frames a commit appends to a write-ahead
/// log are gathered in memory and reach the log file in one write, before the commit is
/// published in the wal-index, instead of with two writes per frame. And a read of one page of
/// a main database reads the next page with it, for the next read of the file if that one asks
/// for exactly it, with no other call on the file between (so within one transaction). Other
/// files, and every other operation, go to the default VFS unchanged; the bytes, their order
/// and the locking protocol are SQLite's own, so connections of other VFSes and other
/// processes share the database as before.
const char *larder_sqlite_vfs_name(void);

/// What a file opened through the VFS went through, for tests. A log: `calls` counts the writes
/// SQLite asked for, `writes` those that reached the default VFS, `directWrites` the writes among
/// them that went straight to the file (rewrites of frames, and writes too large to gather). A
/// main database: `reads` counts the reads SQLite asked for, `readAheadHits` those served from
/// the page read ahead with the one before.
typedef struct {
    uint64_t calls;
    uint64_t writes;
    uint64_t directWrites;
    uint64_t reads;
    uint64_t readAheadHits;
} larder_sqlite_vfs_counts;

/// The counts of `db`'s main database file (`log` 0) or of its log (`log` 1); 0 when that file
/// is not open through the VFS (a log the connection has not opened yet, or a connection of
/// another VFS), else 1. Call it on the thread that owns the connection.
int larder_sqlite_vfs_counts_of(sqlite3 *db, int log, larder_sqlite_vfs_counts *out);

#endif
