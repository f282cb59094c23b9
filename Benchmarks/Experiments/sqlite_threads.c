// How far raw SQLite point reads scale from one thread to two on this machine (finding 22): the
// reference for the two-thread rows of compare.sh, measured without Larder.
//
// Each round times `passes` scattered passes over `n` keys of 100-byte values (a WITHOUT ROWID
// table keyed by text, prepared once per connection): on one thread; on two threads with a
// connection each on one WAL database; and on two threads each reading a database of its own
// (nothing shared above the kernel). Two switches set how the readers work:
//   HOLD=1    each reader keeps one read transaction open for its whole run (as Larder's pooled
//             readers keep theirs between reads), so no statement takes SQLite's file locks;
//             without it every statement opens and ends its own read transaction (two `fcntl`
//             calls on the -shm file each, as diskcache and compare.sh's raw SQLite baseline do)
//   NOSTAT=1  SQLITE_CONFIG_MEMSTATUS off (as Larder sets it), so sqlite3_malloc takes no
//             process-wide mutex
//
//   gcc -O2 -pthread -o /tmp/sqlite_threads Experiments/sqlite_threads.c -lsqlite3
//   NOSTAT=1 HOLD=1 /tmp/sqlite_threads /tmp/sqlite-threads-dir 15000 20 7
#define _GNU_SOURCE
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int g_n, g_passes;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(sqlite3 *db, const char *what) {
    fprintf(stderr, "sqlite_threads: %s: %s\n", what, db ? sqlite3_errmsg(db) : "failed");
    exit(1);
}

static void key_for(char *key, size_t size, long i) { snprintf(key, size, "k-100B-%08ld", i); }

/// A new WAL database at `path` holding `g_n` rows of 100 bytes, checkpointed.
static void make_database(const char *path) {
    char wal[600], shm[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    remove(path), remove(wal), remove(shm);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die(db, "open");
    if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     "CREATE TABLE t(key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID; BEGIN;", 0, 0, 0) != SQLITE_OK)
        die(db, "schema");
    sqlite3_stmt *insert;
    if (sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?)", -1, &insert, 0) != SQLITE_OK) die(db, "prepare");
    char key[64], value[100];
    memset(value, 7, sizeof value);
    for (long i = 0; i < g_n; i++) {
        key_for(key, sizeof key, i);
        sqlite3_bind_text(insert, 1, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(insert, 2, value, sizeof value, SQLITE_STATIC);
        if (sqlite3_step(insert) != SQLITE_DONE) die(db, "insert");
        sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    if (sqlite3_exec(db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE);", 0, 0, 0) != SQLITE_OK) die(db, "commit");
    sqlite3_close(db);
}

typedef struct {
    const char *path;
    long offset;
    long bytes;
} Reader;

/// `g_passes` passes over the keys in a scattered order starting at `offset`, on a connection of
/// its own; sums the value sizes so the reads cannot be dropped.
static void *read_all(void *argument) {
    Reader *reader = argument;
    sqlite3 *db;
    if (sqlite3_open_v2(reader->path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, 0) != SQLITE_OK) die(db, "open");
    sqlite3_stmt *select;
    if (sqlite3_prepare_v3(db, "SELECT value FROM t WHERE key = ?", -1, SQLITE_PREPARE_PERSISTENT, &select, 0) != SQLITE_OK)
        die(db, "prepare");
    int hold = getenv("HOLD") != NULL;
    if (hold && sqlite3_exec(db, "BEGIN; SELECT count(*) FROM t WHERE key = '';", 0, 0, 0) != SQLITE_OK) die(db, "begin");
    char key[64];
    long bytes = 0;
    for (int pass = 0; pass < g_passes; pass++) {
        for (long i = 0; i < g_n; i++) {
            key_for(key, sizeof key, ((i + reader->offset) * 7919) % g_n);
            sqlite3_bind_text(select, 1, key, -1, SQLITE_STATIC);
            if (sqlite3_step(select) != SQLITE_ROW) die(db, "select");
            bytes += sqlite3_column_bytes(select, 0);
            sqlite3_reset(select);
        }
    }
    if (hold && sqlite3_exec(db, "COMMIT", 0, 0, 0) != SQLITE_OK) die(db, "commit");
    sqlite3_finalize(select);
    sqlite3_close(db);
    reader->bytes = bytes;
    return NULL;
}

/// Seconds for two threads reading `first` and `second` at once.
static double two_threads(const char *first, const char *second) {
    pthread_t a, b;
    Reader ra = {first, 0, 0}, rb = {second, g_n / 2, 0};
    double start = now_seconds();
    if (pthread_create(&a, NULL, read_all, &ra) != 0 || pthread_create(&b, NULL, read_all, &rb) != 0) die(NULL, "pthread_create");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return now_seconds() - start;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: sqlite_threads DIR N PASSES ROUNDS\n");
        return 2;
    }
    if (getenv("NOSTAT") && sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK) die(NULL, "SQLITE_CONFIG_MEMSTATUS");
    const char *dir = argv[1];
    g_n = atoi(argv[2]);
    g_passes = atoi(argv[3]);
    int rounds = atoi(argv[4]);
    if (g_n < 2 || g_passes < 1 || rounds < 1) {
        fprintf(stderr, "sqlite_threads: N must be at least 2, PASSES and ROUNDS at least 1\n");
        return 2;
    }
    mkdir(dir, 0755);
    char first[512], second[512];
    snprintf(first, sizeof first, "%s/first.db", dir);
    snprintf(second, sizeof second, "%s/second.db", dir);
    make_database(first);
    make_database(second);
    // A connection kept open on each database for the whole run, so that no reader's close is
    // the last one (which checkpoints and removes the log under an exclusive lock, making a
    // reader that opens at that moment fail with "database is locked").
    sqlite3 *keepers[2];
    if (sqlite3_open(first, &keepers[0]) != SQLITE_OK) die(keepers[0], "open");
    if (sqlite3_open(second, &keepers[1]) != SQLITE_OK) die(keepers[1], "open");
    printf("round\tone thread reads/s\ttwo threads, one database\tratio\ttwo threads, two databases\tratio\n");
    double reads = (double)g_n * g_passes;
    for (int round = 0; round < rounds; round++) {
        Reader alone = {first, 0, 0};
        double start = now_seconds();
        read_all(&alone);
        double one = reads / (now_seconds() - start);
        double shared = 2 * reads / two_threads(first, first);
        double separate = 2 * reads / two_threads(first, second);
        printf("%d\t%.0f\t%.0f\t%.2f\t%.0f\t%.2f\n", round, one, shared, shared / one, separate, separate / one);
    }
    sqlite3_close(keepers[0]);
    sqlite3_close(keepers[1]);
    return 0;
}
