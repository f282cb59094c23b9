#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

/// `SQLITE_TRANSIENT` is a cast macro Swift cannot import: SQLite copies the bound bytes.
static inline sqlite3_destructor_type csqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/// `SQLITE_STATIC`: the bytes outlive the statement step, SQLite does not copy them.
static inline sqlite3_destructor_type csqlite_static(void) {
    return SQLITE_STATIC;
}

/// `sqlite3_db_config` is variadic: turns `SQLITE_DBCONFIG_RESET_DATABASE` on (1) or off (0).
/// With it on, a `VACUUM` empties the database, even a corrupt one, under SQLite's own locks.
static inline int csqlite_set_reset_database(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_RESET_DATABASE, on, 0);
}

/// `sqlite3_config` is variadic: turns SQLite's memory statistics off (`SQLITE_CONFIG_MEMSTATUS`
/// 0), so an allocation no longer takes a process-wide mutex. Must run before SQLite initializes;
/// returns `SQLITE_MISUSE` (and changes nothing) after.
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/// The first region of the main database's wal-index (the `-shm` file, 32 KiB regions), as the
/// connection's own VFS maps it (`xShmMap`, no new mapping); NULL when there is none (not in
/// WAL mode, no region yet, or a VFS without shared memory). It stays mapped while the
/// connection is open in WAL mode. Call it on the thread that owns the connection.
static inline const volatile void *csqlite_wal_index(sqlite3 *db) {
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || file == NULL) return NULL;
    const sqlite3_io_methods *methods = file->pMethods;
    if (methods == NULL || methods->iVersion < 2 || methods->xShmMap == NULL) return NULL;
    volatile void *region = NULL;
    if (methods->xShmMap(file, 0, 32768, 0, &region) != SQLITE_OK) return NULL;
    return region;
}

/// Bytes of the wal-index header: its two copies (48 bytes each), which every commit to the
/// database rewrites (frame count, change counter, salts and checksums), in any process.
/// See https://www.sqlite.org/walformat.html ("The WAL-Index Header").
#define CSQLITE_WAL_INDEX_HEADER_BYTES 96

/// Copies the wal-index header into `out` (96 bytes), after an acquire fence.
static inline void csqlite_wal_index_header_copy(const volatile void *index, void *out) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    memcpy(out, (const void *)index, CSQLITE_WAL_INDEX_HEADER_BYTES);
}

/// Whether the wal-index header still equals `saved` (96 bytes), after an acquire fence.
static inline int csqlite_wal_index_header_equals(const volatile void *index, const void *saved) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return memcmp((const void *)index, saved, CSQLITE_WAL_INDEX_HEADER_BYTES) == 0;
}

/// A word that changes with every commit to the database, in any process: the change counter
/// (`iChange`) and the second checksum word of the wal-index header's first copy, read after an
/// acquire fence. See https://www.sqlite.org/walformat.html ("The WAL-Index Header").
static inline uint64_t csqlite_wal_index_change_word(const volatile void *index) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    const volatile uint32_t *header = (const volatile uint32_t *)index;
    return ((uint64_t)header[2] << 32) | header[11];
}

#endif
