// rank_cost: what does ranking a batch of logged reads cost in SQLite itself, and would another
// form of the same writes cost less? (issue #13, "2 threads reading ≥ 1.6× one thread").
//
// Under `.lru`, DiskStore logs each hit in memory and ranks the log into the `access` table in
// batches of 4,096 reads, on its I/O queue: one prepared
//   UPDATE access SET seq = ?2, accessed = max(accessed, ?3) WHERE entry = ?1 AND seq < ?2
// per distinct row read, in one transaction. Two reading threads share two cores with that
// ranking, so its cost per read bounds the two-thread row. This program builds the same table
// (2 KiB pages, WAL, synchronous=NORMAL, 15,000 rows, the columns DiskStore's `access` has) and
// times batches of 4,096 rows drawn at random, four ways, in rotating order:
//
//   read-order   the statement above, rows in the order they were read (DiskStore's way)
//   rowid-order  the same statement, rows sorted by row id first (neighbouring leaves)
//   json-each    one `UPDATE … FROM json_each(?)` over the batch as a JSON array of integers
//   blob         no statement: the rank kept as a 16-byte BLOB (sequence and time, big-endian,
//                so that ORDER BY still sorts by sequence) in a table of its own, rewritten
//                in place through one incremental-blob handle (`sqlite3_blob_reopen`, read,
//                compare, `sqlite3_blob_write`), rows in read order. What a schema that kept
//                the rank in a BLOB column could save; it would need a new schema version.
//
// and reports nanoseconds per row for the statements and, apart, for the COMMIT.
//
//   gcc -O2 -Wall -o /tmp/rank_cost Benchmarks/Experiments/rank_cost.c -lsqlite3
//   /tmp/rank_cost /tmp/rank-cost-dir [rounds]
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { ROWS = 15000, BATCH = 4096, BATCHES = 20, FORMS = 4 };
static const char *form_names[FORMS] = {"read-order", "rowid-order", "json-each", "blob"};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "rank_cost: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static void exec(sqlite3 *db, const char *sql) { check(sqlite3_exec(db, sql, NULL, NULL, NULL), db, sql); }

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *statement = NULL;
    check(sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &statement, NULL), db, sql);
    return statement;
}

static int compare_rows(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void put_big_endian(unsigned char *bytes, uint64_t value) {
    for (int i = 7; i >= 0; i--, value >>= 8) bytes[i] = (unsigned char)(value & 0xFF);
}

static uint64_t get_big_endian(const unsigned char *bytes) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = value << 8 | bytes[i];
    return value;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count) {
    qsort(values, (size_t)count, sizeof(double), compare_doubles);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [rounds]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (rounds < 1) rounds = 1;
    mkdir(argv[1], 0700);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.sqlite", argv[1]);
    char sidecar[4200];
    unlink(path);
    snprintf(sidecar, sizeof sidecar, "%s-wal", path);
    unlink(sidecar);
    snprintf(sidecar, sizeof sidecar, "%s-shm", path);
    unlink(sidecar);

    sqlite3 *db = NULL;
    check(sqlite3_open(path, &db), db, "open");
    exec(db, "PRAGMA page_size = 2048; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
             "CREATE TABLE access (entry INTEGER PRIMARY KEY, seq INTEGER NOT NULL, accessed INTEGER NOT NULL,"
             " queue INTEGER NOT NULL DEFAULT 0, freq INTEGER NOT NULL DEFAULT 0);"
             "CREATE TABLE access_blob (entry INTEGER PRIMARY KEY, queue INTEGER NOT NULL DEFAULT 0,"
             " freq INTEGER NOT NULL DEFAULT 0, rank BLOB NOT NULL);");
    exec(db, "BEGIN");
    sqlite3_stmt *insert = prepare(db, "INSERT INTO access (entry, seq, accessed) VALUES (?1, ?1, 0)");
    sqlite3_stmt *insertBlob = prepare(db, "INSERT INTO access_blob (entry, rank) VALUES (?1, ?2)");
    unsigned char rank[16];
    for (int64_t row = 1; row <= ROWS; row++) {
        sqlite3_bind_int64(insert, 1, row);
        check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
        put_big_endian(rank, (uint64_t)row);
        put_big_endian(rank + 8, 0);
        sqlite3_bind_int64(insertBlob, 1, row);
        sqlite3_bind_blob(insertBlob, 2, rank, 16, SQLITE_TRANSIENT);
        check(sqlite3_step(insertBlob), db, "insert blob");
        sqlite3_reset(insertBlob);
    }
    sqlite3_finalize(insert);
    sqlite3_finalize(insertBlob);
    exec(db, "COMMIT");

    sqlite3_stmt *touch = prepare(db,
        "UPDATE access SET seq = ?2, accessed = max(accessed, ?3) WHERE entry = ?1 AND seq < ?2");
    // The batch as one JSON array of integers (row << 32 | sequence, the sequence below 2^32).
    sqlite3_stmt *bulk = prepare(db,
        "UPDATE access SET seq = b.seq, accessed = max(access.accessed, ?2)"
        " FROM (SELECT value >> 32 AS entry, value & 4294967295 AS seq FROM json_each(?1)) AS b"
        " WHERE access.entry = b.entry AND access.seq < b.seq");

    int64_t sequence = ROWS, accessed = 1;
    int64_t rows[BATCH];
    char *json = malloc((size_t)BATCH * 24 + 4);
    double statements[FORMS][64], commits[FORMS][64];
    srand(20261125);
    for (int round = 0; round < rounds && round < 64; round++) {
        for (int turn = 0; turn < FORMS; turn++) {
            int form = (round + turn) % FORMS;
            double statementTime = 0, commitTime = 0;
            for (int batch = 0; batch < BATCHES; batch++) {
                for (int i = 0; i < BATCH; i++) rows[i] = 1 + rand() % ROWS;
                if (form == 1) qsort(rows, BATCH, sizeof(int64_t), compare_rows);
                accessed++;
                double start = now();
                exec(db, "BEGIN IMMEDIATE");
                if (form == 3) {
                    sqlite3_blob *blob = NULL;
                    for (int i = 0; i < BATCH; i++) {
                        ++sequence;
                        check(blob ? sqlite3_blob_reopen(blob, rows[i])
                                   : sqlite3_blob_open(db, "main", "access_blob", "rank", rows[i], 1, &blob),
                              db, "blob open");
                        check(sqlite3_blob_read(blob, rank, 16, 0), db, "blob read");
                        if (get_big_endian(rank) < (uint64_t)sequence) {
                            put_big_endian(rank, (uint64_t)sequence);
                            if (get_big_endian(rank + 8) < (uint64_t)accessed) put_big_endian(rank + 8, (uint64_t)accessed);
                            check(sqlite3_blob_write(blob, rank, 16, 0), db, "blob write");
                        }
                    }
                    // An open handle counts as a statement in progress: COMMIT would fail.
                    sqlite3_blob_close(blob);
                } else if (form < 2) {
                    for (int i = 0; i < BATCH; i++) {
                        sqlite3_bind_int64(touch, 1, rows[i]);
                        sqlite3_bind_int64(touch, 2, ++sequence);
                        sqlite3_bind_int64(touch, 3, accessed);
                        check(sqlite3_step(touch), db, "update");
                        sqlite3_reset(touch);
                    }
                } else {
                    char *end = json;
                    *end++ = '[';
                    for (int i = 0; i < BATCH; i++) {
                        end += sprintf(end, "%s%lld", i ? "," : "", (long long)((rows[i] << 32) | ++sequence));
                    }
                    *end++ = ']';
                    sqlite3_bind_text(bulk, 1, json, (int)(end - json), SQLITE_STATIC);
                    sqlite3_bind_int64(bulk, 2, accessed);
                    check(sqlite3_step(bulk), db, "bulk update");
                    sqlite3_reset(bulk);
                }
                double middle = now();
                exec(db, "COMMIT");
                statementTime += middle - start;
                commitTime += now() - middle;
            }
            statements[form][round] = statementTime / (BATCHES * BATCH) * 1e9;
            commits[form][round] = commitTime / (BATCHES * BATCH) * 1e9;
        }
    }
    int counted = rounds < 64 ? rounds : 64;
    printf("ns per row, medians of %d rounds of %d batches of %d rows over %d rows\n", counted, BATCHES, BATCH, ROWS);
    for (int form = 0; form < FORMS; form++) {
        printf("%-12s statements %6.0f  commit %5.0f\n", form_names[form], median(statements[form], counted),
               median(commits[form], counted));
    }
    free(json);
    sqlite3_finalize(touch);
    sqlite3_finalize(bulk);
    sqlite3_close(db);
    return 0;
}
