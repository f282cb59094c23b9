// Raw C baselines for Benchmarks/compare.sh: the physical limit of what Larder builds on.
//
// Runs the same workload as LarderCompare (Swift) and diskcache_runner.py (Python) and prints
// one line per case:  case<TAB>contender<TAB>value<TAB>unit
//
//   sqlite   prepared INSERT OR REPLACE / SELECT on one table, WAL, synchronous=NORMAL,
//            autocommit (one transaction per operation)            -> disk.*(100B), disk.*(4KiB)
//            and the same gets on one thread, then on two threads with a connection each
//                                                   -> disk.get-hit(100B|4KiB, 2 threads)
//   file     write to tmp/ + rename into place; open + read + close -> disk.*(100KiB), disk.*(1MiB)
//   zlib     deflateInit2(level, 15+16 = gzip) / inflateInit2(15+16), crc32()
//   openssl  EVP_Digest() with an EVP_MD fetched once (md5, sha1, sha256)
//
// Build: gcc -O2 -pthread -o baseline baseline.c -lsqlite3 -lz -lcrypto
// Usage: baseline dir=/tmp/x n100=20000 n4k=10000 n100k=1000 n1m=200 ncodec=300 ndigest=500000
//   [pagesize=N: the SQLite table's page size, SQLite's default (4 KiB) if not given; with it the
//   sqlite rows are reported as contender "sqlite-<N>", e.g. pagesize=2048 for DiskStore's pages]
//   (gzip.compress runs ncodec times, gzip.decompress 10x, crc32 50x; digests of 64 B ndigest
//   times, of 64 KiB ndigest/200 times)
//
// The workload (keys, value bytes, access order) is defined in Benchmarks/README.md and must stay
// identical across the three programs.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static const char *g_dir = "/tmp/larder-baseline";
static long n100 = 20000, n4k = 10000, n100k = 1000, n1m = 200, ncodec = 300, ndigest = 500000;
static long g_page_size = 0;                 // 0: SQLite's default
static char g_sqlite_name[32] = "sqlite";    // the contender name of the sqlite rows

static void die(const char *what) {
    fprintf(stderr, "baseline: %s: %s\n", what, strerror(errno));
    exit(1);
}

// The page cache's memory, warmed before each timed run of writes: `bytes` written to a scratch
// file and deleted (its pages are dropped unwritten). On this project's VMs the host backs guest
// memory lazily and takes freed memory back after a few seconds, so without this whichever
// contender's writes land on memory the host must back again runs up to ten times slower
// (Benchmarks/README.md, finding 13). LarderCompare and diskcache_runner.py do the same.
static void warm_page_cache(long long bytes) {
    static uint8_t chunk[1 << 20];
    char path[4200];
    snprintf(path, sizeof path, "%s/warm-up", g_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("open warm-up");
    if (bytes > (512LL << 20)) bytes = 512LL << 20;
    for (long long done = 0; done < bytes; done += sizeof chunk) {
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) die("write warm-up");
    }
    close(fd);
    unlink(path);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(const char *name, const char *contender, long ops, double seconds) {
    printf("%s\t%s\t%.1f\tops/s\n", name, contender, (double)ops / seconds);
    fflush(stdout);
}

// --- Workload data, identical in Swift (BenchmarkSupport/Workload.swift) and Python --------------

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Incompressible bytes: splitmix64(seed 42), little-endian 8 bytes at a time.
static void fill_random(uint8_t *buffer, size_t count) {
    uint64_t state = 42;
    for (size_t i = 0; i < count; i += 8) {
        uint64_t v = splitmix64(&state);
        for (size_t j = 0; j < 8 && i + j < count; j++) buffer[i + j] = (uint8_t)(v >> (8 * j));
    }
}

// Compressible text: words picked by splitmix64(seed 7), separated by spaces, cut at count.
static void fill_text(uint8_t *buffer, size_t count) {
    static const char *words[16] = {"cache", "larder", "swift", "linux", "sqlite", "blob", "index",
                                    "memory", "disk", "evict", "gzip", "value", "key", "hash",
                                    "expiry", "trim"};
    uint64_t state = 7;
    size_t i = 0;
    while (i < count) {
        const char *w = words[splitmix64(&state) % 16];
        for (size_t j = 0; w[j] && i < count; j++) buffer[i++] = (uint8_t)w[j];
        if (i < count) buffer[i++] = ' ';
    }
}

// Value for key i: the random base with its first 8 bytes replaced by i (little-endian).
static void stamp(uint8_t *value, size_t size, uint64_t i) {
    for (size_t j = 0; j < 8 && j < size; j++) value[j] = (uint8_t)(i >> (8 * j));
}

// The values of keys 0..<n, built before the timed writes in one block of n * size bytes, as
// LarderCompare and diskcache_runner.py build theirs: each timed write then reads bytes that no
// earlier write just touched, as theirs do (restamping one buffer kept every write's source in
// the CPU's caches, which made the file-write limit faster than the same work; finding 22).
static uint8_t *make_values(size_t size, long n) {
    uint8_t *values = malloc(size * (size_t)n);
    if (values == NULL) die("malloc");
    fill_random(values, size);
    for (long i = 0; i < n; i++) {
        if (i > 0) memcpy(values + (size_t)i * size, values, size);
        stamp(values + (size_t)i * size, size, (uint64_t)i);
    }
    return values;
}

static long gcd(long a, long b) { return b == 0 ? a : gcd(b, a % b); }

// Read order: i * 7919 mod n (a permutation when gcd(7919, n) == 1; plain order otherwise).
static long read_index(long i, long n) { return gcd(7919, n) == 1 ? (i * 7919) % n : i; }

static const char *size_label(size_t size) {
    switch (size) {
    case 100: return "100B";
    case 4096: return "4KiB";
    case 102400: return "100KiB";
    case 1048576: return "1MiB";
    default: return "?";
    }
}

static void key_for(char *out, size_t cap, const char *prefix, size_t size, long i) {
    snprintf(out, cap, "%s%s-%ld", prefix, size_label(size), i);
}

static void rm_rf(const char *path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) die("rm -rf");
}

// --- SQLite ---------------------------------------------------------------------------------------

static void sqlite_check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "baseline: sqlite %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
        exit(1);
    }
}

// One reader of the two-thread reads: its own connection and statement, `n` gets of the keys in
// the read order starting `offset` places in (as LarderCompare's two-thread phases read).
typedef struct {
    sqlite3 *db;
    sqlite3_stmt *select;
    uint8_t *copy;
    size_t size;
    long n, offset;
} Reader;

static void *read_keys(void *argument) {
    Reader *reader = argument;
    char key[128];
    for (long step = 0; step < reader->n; step++) {
        key_for(key, sizeof key, "k", reader->size, read_index((step + reader->offset) % reader->n, reader->n));
        sqlite3_bind_text(reader->select, 1, key, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(reader->select) != SQLITE_ROW) { fprintf(stderr, "baseline: sqlite miss on %s\n", key); exit(1); }
        if ((size_t)sqlite3_column_bytes(reader->select, 0) != reader->size) { fprintf(stderr, "baseline: wrong size\n"); exit(1); }
        memcpy(reader->copy, sqlite3_column_blob(reader->select, 0), reader->size);
        sqlite3_reset(reader->select);
    }
    return NULL;
}

// Raw SQLite's own two-thread scaling, the reference of LarderCompare's two-thread rows: `n` gets
// on one thread, then `n` gets on each of two threads at once, each reader on a connection of its
// own to the same WAL database (opened and prepared before the timing). Reported under the
// case `disk.get-hit(<size>, 2 threads)` as `<sqlite>-1thread` and `<sqlite>` (both threads).
static void bench_sqlite_threads(const char *path, size_t size, long n) {
    Reader readers[2];
    for (int i = 0; i < 2; i++) {
        readers[i] = (Reader){.size = size, .n = n, .offset = i * (n / 2)};
        if (sqlite3_open_v2(path, &readers[i].db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) die("sqlite3_open_v2");
        sqlite_check(sqlite3_prepare_v2(readers[i].db, "SELECT value FROM entry WHERE key = ?", -1, &readers[i].select, NULL),
                     readers[i].db, "prepare");
        readers[i].copy = malloc(size);
        if (readers[i].copy == NULL) die("malloc");
    }
    char name[128], contender[64];
    snprintf(name, sizeof name, "disk.get-hit(%s, 2 threads)", size_label(size));
    double start = now_seconds();
    read_keys(&readers[0]);
    double one = now_seconds() - start;
    pthread_t threads[2];
    start = now_seconds();
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&threads[i], NULL, read_keys, &readers[i]) != 0) die("pthread_create");
    }
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    double two = now_seconds() - start;
    snprintf(contender, sizeof contender, "%s-1thread", g_sqlite_name);
    report(name, contender, n, one);
    report(name, g_sqlite_name, 2 * n, two);
    for (int i = 0; i < 2; i++) {
        free(readers[i].copy);
        sqlite3_finalize(readers[i].select);
        sqlite3_close(readers[i].db);
    }
}

static void bench_sqlite(size_t size, long n, int with_miss) {
    char path[4096], name[128], key[128];
    snprintf(path, sizeof path, "%s/sqlite-%s", g_dir, size_label(size));
    rm_rf(path);
    if (mkdir(path, 0755) != 0) die("mkdir");
    strncat(path, "/index.sqlite", sizeof path - strlen(path) - 1);

    sqlite3 *db = NULL;
    sqlite_check(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL), db, "open");
    if (g_page_size > 0) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA page_size=%ld;", g_page_size);
        sqlite_check(sqlite3_exec(db, pragma, NULL, NULL, NULL), db, "page_size");
    }
    sqlite_check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                                  "CREATE TABLE entry(key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);",
                              NULL, NULL, NULL), db, "schema");
    sqlite3_stmt *insert = NULL, *select = NULL;
    sqlite_check(sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO entry(key, value) VALUES (?, ?)", -1, &insert, NULL), db, "prepare");
    sqlite_check(sqlite3_prepare_v2(db, "SELECT value FROM entry WHERE key = ?", -1, &select, NULL), db, "prepare");

    uint8_t *values = make_values(size, n);

    sync();  // earlier cases' dirty pages are written back before, not during, the timed writes
    warm_page_cache((long long)n * (long long)size);
    double start = now_seconds();
    for (long i = 0; i < n; i++) {
        key_for(key, sizeof key, "k", size, i);
        sqlite3_bind_text(insert, 1, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(insert, 2, values + (size_t)i * size, (int)size, SQLITE_TRANSIENT);
        sqlite_check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
    }
    snprintf(name, sizeof name, "disk.set(%s)", size_label(size));
    report(name, g_sqlite_name, n, now_seconds() - start);

    uint8_t *copy = malloc(size);
    start = now_seconds();
    for (long i = 0; i < n; i++) {
        key_for(key, sizeof key, "k", size, read_index(i, n));
        sqlite3_bind_text(select, 1, key, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(select) != SQLITE_ROW) { fprintf(stderr, "baseline: sqlite miss on %s\n", key); exit(1); }
        int length = sqlite3_column_bytes(select, 0);
        if ((size_t)length != size) { fprintf(stderr, "baseline: wrong size\n"); exit(1); }
        memcpy(copy, sqlite3_column_blob(select, 0), (size_t)length);  // hand the bytes out, as a cache must
        sqlite3_reset(select);
    }
    snprintf(name, sizeof name, "disk.get-hit(%s)", size_label(size));
    report(name, g_sqlite_name, n, now_seconds() - start);
    bench_sqlite_threads(path, size, n);

    if (with_miss) {
        start = now_seconds();
        for (long i = 0; i < n; i++) {
            key_for(key, sizeof key, "miss", size, i);
            sqlite3_bind_text(select, 1, key, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(select) != SQLITE_DONE) { fprintf(stderr, "baseline: unexpected hit\n"); exit(1); }
            sqlite3_reset(select);
        }
        report("disk.get-miss", g_sqlite_name, n, now_seconds() - start);
    }
    free(copy);
    free(values);
    sqlite3_finalize(insert);
    sqlite3_finalize(select);
    sqlite3_close(db);
    path[strlen(path) - strlen("/index.sqlite")] = 0;
    rm_rf(path);
}

// --- Plain files ----------------------------------------------------------------------------------

static void write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) { if (errno == EINTR) continue; die("write"); }
        p += w; n -= (size_t)w;
    }
}

static void bench_files(size_t size, long n) {
    char dir[4096], tmp[4600], final[4600], name[128], key[128];
    snprintf(dir, sizeof dir, "%s/files-%s", g_dir, size_label(size));
    rm_rf(dir);
    snprintf(tmp, sizeof tmp, "%s", dir);
    if (mkdir(dir, 0755) != 0) die("mkdir");
    snprintf(tmp, sizeof tmp, "%s/tmp", dir);
    if (mkdir(tmp, 0755) != 0) die("mkdir");
    snprintf(tmp, sizeof tmp, "%s/blobs", dir);
    if (mkdir(tmp, 0755) != 0) die("mkdir");

    uint8_t *values = make_values(size, n);
    sync();  // as in bench_sqlite
    warm_page_cache((long long)n * (long long)size);
    double start = now_seconds();
    for (long i = 0; i < n; i++) {
        key_for(key, sizeof key, "k", size, i);
        const uint8_t *value = values + (size_t)i * size;
        snprintf(tmp, sizeof tmp, "%s/tmp/%s", dir, key);
        snprintf(final, sizeof final, "%s/blobs/%s", dir, key);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) die("open");
        write_all(fd, value, size);
        if (close(fd) != 0) die("close");
        if (rename(tmp, final) != 0) die("rename");
    }
    snprintf(name, sizeof name, "disk.set(%s)", size_label(size));
    report(name, "file", n, now_seconds() - start);

    start = now_seconds();
    for (long i = 0; i < n; i++) {
        key_for(key, sizeof key, "k", size, read_index(i, n));
        snprintf(final, sizeof final, "%s/blobs/%s", dir, key);
        int fd = open(final, O_RDONLY | O_CLOEXEC);
        if (fd < 0) die("open");
        struct stat st;
        if (fstat(fd, &st) != 0) die("fstat");
        uint8_t *buffer = malloc((size_t)st.st_size);  // a fresh buffer per read, as a cache hands out
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t r = read(fd, buffer + got, (size_t)st.st_size - got);
            if (r < 0) { if (errno == EINTR) continue; die("read"); }
            if (r == 0) break;
            got += (size_t)r;
        }
        close(fd);
        if (got != size) { fprintf(stderr, "baseline: short read\n"); exit(1); }
        free(buffer);
    }
    snprintf(name, sizeof name, "disk.get-hit(%s)", size_label(size));
    report(name, "file", n, now_seconds() - start);
    free(values);
    rm_rf(dir);
}

// --- zlib -----------------------------------------------------------------------------------------

static size_t gzip_compress(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int level) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (deflateInit2(&s, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) die("deflateInit2");
    s.next_in = (Bytef *)in; s.avail_in = (uInt)n;
    s.next_out = out; s.avail_out = (uInt)cap;
    if (deflate(&s, Z_FINISH) != Z_STREAM_END) die("deflate");
    size_t produced = s.total_out;
    deflateEnd(&s);
    return produced;
}

static size_t gzip_decompress(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, 15 + 16) != Z_OK) die("inflateInit2");
    s.next_in = (Bytef *)in; s.avail_in = (uInt)n;
    s.next_out = out; s.avail_out = (uInt)cap;
    if (inflate(&s, Z_FINISH) != Z_STREAM_END) die("inflate");
    size_t produced = s.total_out;
    inflateEnd(&s);
    return produced;
}

static void bench_zlib(void) {
    const size_t size = 102400;
    uint8_t *text = malloc(size);
    fill_text(text, size);
    size_t cap = deflateBound(NULL, size) + 64;
    uint8_t *packed = malloc(cap), *unpacked = malloc(size);

    size_t packed_size = 0;
    double start = now_seconds();
    for (long i = 0; i < ncodec; i++) {
        uint8_t *out = malloc(cap);  // a fresh output buffer per call, as Gzip.compress returns Data
        packed_size = gzip_compress(text, size, out, cap, 6);
        if (i == 0) memcpy(packed, out, packed_size);
        free(out);
    }
    report("gzip.compress(100KiB text)", "zlib", ncodec, now_seconds() - start);

    long inflate_ops = ncodec * 10;
    start = now_seconds();
    for (long i = 0; i < inflate_ops; i++) {
        uint8_t *out = malloc(size);
        if (gzip_decompress(packed, packed_size, out, size) != size) die("inflate size");
        if (i == 0) memcpy(unpacked, out, size);
        free(out);
    }
    report("gzip.decompress(100KiB text)", "zlib", inflate_ops, now_seconds() - start);
    if (memcmp(unpacked, text, size) != 0) { fprintf(stderr, "baseline: gzip round trip\n"); exit(1); }

    volatile uLong sink = 0;
    long crc_ops = ncodec * 50;
    start = now_seconds();
    for (long i = 0; i < crc_ops; i++) sink += crc32(0L, text, (uInt)size);
    report("crc32(100KiB)", "zlib", crc_ops, now_seconds() - start);
    (void)sink;
    free(text); free(packed); free(unpacked);
}

// --- OpenSSL digests ------------------------------------------------------------------------------

static void bench_digest(const char *algorithm, const char *label) {
    EVP_MD *md = EVP_MD_fetch(NULL, algorithm, NULL);
    if (!md) die("EVP_MD_fetch");
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int outlen = 0;
    char name[128];
    size_t sizes[2] = {64, 65536};
    const char *labels[2] = {"64B", "64KiB"};
    for (int k = 0; k < 2; k++) {
        uint8_t *data = malloc(sizes[k]);
        fill_random(data, sizes[k]);
        long ops = k == 0 ? ndigest : ndigest / 200;
        if (ops < 1) ops = 1;
        double start = now_seconds();
        for (long i = 0; i < ops; i++) {
            if (!EVP_Digest(data, sizes[k], out, &outlen, md, NULL)) die("EVP_Digest");
        }
        snprintf(name, sizeof name, "%s(%s)", label, labels[k]);
        report(name, "openssl", ops, now_seconds() - start);
        free(data);
    }
    EVP_MD_free(md);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) { fprintf(stderr, "baseline: expected key=value, got %s\n", argv[i]); return 2; }
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "dir")) g_dir = v;
        else if (!strcmp(k, "n100")) n100 = atol(v);
        else if (!strcmp(k, "n4k")) n4k = atol(v);
        else if (!strcmp(k, "n100k")) n100k = atol(v);
        else if (!strcmp(k, "n1m")) n1m = atol(v);
        else if (!strcmp(k, "ncodec")) ncodec = atol(v);
        else if (!strcmp(k, "ndigest")) ndigest = atol(v);
        else if (!strcmp(k, "pagesize")) {
            g_page_size = atol(v);
            if (g_page_size < 512 || g_page_size > 65536 || (g_page_size & (g_page_size - 1))) {
                fprintf(stderr, "baseline: pagesize must be a power of two from 512 to 65536, got %s\n", v);
                return 2;
            }
            snprintf(g_sqlite_name, sizeof g_sqlite_name, "sqlite-%ld", g_page_size);
        }
        // Keys for the other programs (nmem, nopen, ...) are accepted and ignored.
    }
    mkdir(g_dir, 0755);
    bench_sqlite(100, n100, 1);
    bench_sqlite(4096, n4k, 0);
    bench_files(102400, n100k);
    bench_files(1048576, n1m);
    bench_zlib();
    bench_digest("MD5", "md5");
    bench_digest("SHA1", "sha1");
    bench_digest("SHA256", "sha256");
    return 0;
}
