// rowid_lookup: would a key -> row lookup that is one B-tree descent make DiskStore's reads
// faster? (issue #13, "a key -> row lookup that is one B-tree descent").
//
// DiskStore finds a row by its key through the UNIQUE index on `entries.key` (one descent of
// the index), then reads the row by rowid (a second descent, of the table). The candidate
// design makes the rowid a 64-bit hash of the key, so that a read is one descent of the table
// by integer and a comparison of the stored key. This program measures three layouts of the
// same rows in raw SQLite, with the index's settings (2 KiB pages, WAL, synchronous=NORMAL,
// one transaction per write), so that only the layout differs:
//
//   index   today's: rowids appended, `key TEXT NOT NULL UNIQUE`, read `WHERE key = ?`
//   hashed  rowid = hash(key), the UNIQUE key index kept (prefix scans and uniqueness need
//           it), read `WHERE rowid = ?` and the key compared
//   bare    rowid = hash(key), no key index, read the same way
//
// For 100 B values (15,000 rows) and 4 KiB values (8,000 rows), inline as DiskStore keeps
// them: the sets, two passes of hits in a scattered order, and misses. Rounds rotate the order
// of the layouts; medians over rounds, and each layout's ratio to `index` within a round.
//
//   gcc -O2 -Wall -o /tmp/rowid_lookup Benchmarks/Experiments/rowid_lookup.c -lsqlite3
//   /tmp/rowid_lookup /tmp/rowid-lookup-dir [rounds]
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { LAYOUTS = 3, MEASURES = 5, MAX_ROUNDS = 15 };
static const char *measure_names[MEASURES] = {"set", "hit", "hit-again", "miss", "pages"};

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "rowid_lookup: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

// FNV-1a over the key's bytes, then SplitMix64's finalizer: a stable 64-bit hash.
static int64_t key_hash(const char *key) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 30; h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27; h *= 0x94D049BB133111EBULL;
    h ^= h >> 31;
    return (int64_t)h;
}

static long scattered(long i, long n) { return (i * 7919) % n; }  // n is not a multiple of 7919

static void remove_database(const char *path) {
    char other[700];
    unlink(path);
    snprintf(other, sizeof other, "%s-wal", path);
    unlink(other);
    snprintf(other, sizeof other, "%s-shm", path);
    unlink(other);
}

// One layout, one value size: fills `out` with ops/s per measure (and the page count).
static void run(int layout, size_t size, long n, const char *dir, double out[MEASURES]) {
    char path[600], key[64];
    snprintf(path, sizeof path, "%s/layout-%d-%zu.sqlite", dir, layout, size);
    remove_database(path);
    sqlite3 *db = NULL;
    check(sqlite3_open(path, &db), db, "open");
    const char *schema = layout == 2
        ? "CREATE TABLE entries(key TEXT NOT NULL, crc INTEGER NOT NULL, size INTEGER NOT NULL, data BLOB);"
        : "CREATE TABLE entries(key TEXT NOT NULL UNIQUE, crc INTEGER NOT NULL, size INTEGER NOT NULL, data BLOB);";
    check(sqlite3_exec(db, "PRAGMA page_size = 2048; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", 0, 0, 0),
          db, "pragmas");
    check(sqlite3_exec(db, schema, 0, 0, 0), db, "schema");
    sqlite3_stmt *insert, *select;
    check(sqlite3_prepare_v2(db, layout == 0
              ? "INSERT INTO entries(key, crc, size, data) VALUES (?1, 0, ?3, ?2)"
              : "INSERT INTO entries(rowid, key, crc, size, data) VALUES (?4, ?1, 0, ?3, ?2)", -1, &insert, 0),
          db, "prepare insert");
    check(sqlite3_prepare_v2(db, layout == 0
              ? "SELECT rowid, crc, size, data FROM entries WHERE key = ?1"
              : "SELECT key, crc, size, data FROM entries WHERE rowid = ?1", -1, &select, 0),
          db, "prepare select");

    uint8_t *value = malloc(size), *copy = malloc(size);
    for (size_t i = 0; i < size; i++) value[i] = (uint8_t)rand();
    sync();
    double start = now_seconds();
    for (long i = 0; i < n; i++) {
        snprintf(key, sizeof key, "k%zu-%ld", size, i);
        memcpy(value, &i, sizeof i);
        sqlite3_bind_text(insert, 1, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(insert, 2, value, (int)size, SQLITE_TRANSIENT);
        sqlite3_bind_int64(insert, 3, (sqlite3_int64)size);
        if (layout != 0) sqlite3_bind_int64(insert, 4, key_hash(key));
        check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
    }
    out[0] = (double)n / (now_seconds() - start);

    for (int pass = 0; pass < 2; pass++) {
        start = now_seconds();
        for (long i = 0; i < n; i++) {
            snprintf(key, sizeof key, "k%zu-%ld", size, scattered(i, n));
            if (layout == 0) sqlite3_bind_text(select, 1, key, -1, SQLITE_STATIC);
            else sqlite3_bind_int64(select, 1, key_hash(key));
            if (sqlite3_step(select) != SQLITE_ROW) { fprintf(stderr, "rowid_lookup: miss on %s\n", key); exit(1); }
            if (layout != 0 && strcmp((const char *)sqlite3_column_text(select, 0), key) != 0) {
                fprintf(stderr, "rowid_lookup: hash collision on %s\n", key);
                exit(1);
            }
            int length = sqlite3_column_bytes(select, 3);
            if ((size_t)length != size) { fprintf(stderr, "rowid_lookup: wrong size\n"); exit(1); }
            memcpy(copy, sqlite3_column_blob(select, 3), (size_t)length);
            sqlite3_reset(select);
        }
        out[1 + pass] = (double)n / (now_seconds() - start);
    }

    start = now_seconds();
    for (long i = 0; i < n; i++) {
        snprintf(key, sizeof key, "miss%zu-%ld", size, i);
        if (layout == 0) sqlite3_bind_text(select, 1, key, -1, SQLITE_STATIC);
        else sqlite3_bind_int64(select, 1, key_hash(key));
        if (sqlite3_step(select) != SQLITE_DONE) { fprintf(stderr, "rowid_lookup: unexpected hit\n"); exit(1); }
        sqlite3_reset(select);
    }
    out[3] = (double)n / (now_seconds() - start);

    sqlite3_stmt *pages;
    check(sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &pages, 0), db, "page_count");
    check(sqlite3_step(pages), db, "page_count");
    out[4] = (double)sqlite3_column_int64(pages, 0);
    sqlite3_finalize(pages);
    sqlite3_finalize(insert);
    sqlite3_finalize(select);
    sqlite3_close(db);
    remove_database(path);
    free(value);
    free(copy);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count) {
    qsort(values, (size_t)count, sizeof *values, compare_doubles);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: rowid_lookup <directory> [rounds]\n"); return 2; }
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS) { fprintf(stderr, "rowid_lookup: rounds must be 1...%d\n", MAX_ROUNDS); return 2; }
    mkdir(argv[1], 0755);
    const size_t sizes[2] = {100, 4096};
    const long counts[2] = {15000, 8000};
    static double results[2][LAYOUTS][MAX_ROUNDS][MEASURES];
    for (int round = 0; round < rounds; round++) {
        for (int step = 0; step < LAYOUTS; step++) {
            int layout = (step + round) % LAYOUTS;  // a rotating order
            for (int s = 0; s < 2; s++) run(layout, sizes[s], counts[s], argv[1], results[s][layout][round]);
        }
    }
    printf("size\tmeasure\tindex\thashed\tbare\thashed/index\tbare/index\n");
    for (int s = 0; s < 2; s++) {
        for (int m = 0; m < MEASURES; m++) {
            double medians[LAYOUTS], ratios[2];
            for (int layout = 0; layout < LAYOUTS; layout++) {
                double values[MAX_ROUNDS];
                for (int r = 0; r < rounds; r++) values[r] = results[s][layout][r][m];
                medians[layout] = median(values, rounds);
            }
            for (int layout = 1; layout < LAYOUTS; layout++) {
                double values[MAX_ROUNDS];
                for (int r = 0; r < rounds; r++) values[r] = results[s][layout][r][m] / results[s][0][r][m];
                ratios[layout - 1] = median(values, rounds);
            }
            printf("%zu\t%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\n", sizes[s], measure_names[m], medians[0], medians[1],
                   medians[2], ratios[0], ratios[1]);
        }
    }
    return 0;
}
