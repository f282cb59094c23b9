#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

#include <sqlite3.h>

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

#endif
