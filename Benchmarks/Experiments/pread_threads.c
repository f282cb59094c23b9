// How far reads of cached file pages scale from one thread to two on this machine (finding 22):
// the kernel's part of a 4 KiB hit, whose value SQLite reads from overflow pages with `pread`.
//
// A file of 1 MiB (in the page cache after its first pass) is read in `bytes`-sized `pread`s at
// scattered offsets: `n` reads on one thread, then `n` reads on each of two threads at once,
// first both on one file (each thread with a descriptor of its own), then each on a file of its
// own. A third line times a system call that touches no file (`getppid`) the same way, and a
// fourth a loop that makes none, for what the machine gives two threads at all.
//
//   gcc -O2 -pthread -o /tmp/pread_threads Experiments/pread_threads.c
//   /tmp/pread_threads /tmp/pread-threads-dir 2000000 2048 5
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { FILE_BYTES = 1 << 20 };
enum Work { PREAD, GETPPID, COMPUTE };

static long g_n, g_bytes;

typedef struct {
    enum Work work;
    const char *path;
    uint64_t sink;
} Job;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void *run(void *argument) {
    Job *job = argument;
    uint64_t x = 88172645463325252ull, sink = 0;
    if (job->work == PREAD) {
        int fd = open(job->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) die("open");
        char *buffer = malloc((size_t)g_bytes);
        if (buffer == NULL) die("malloc");
        long slots = FILE_BYTES / g_bytes;
        for (long i = 0; i < g_n; i++) {
            off_t offset = (off_t)(((i * 7919) % slots) * g_bytes);
            if (pread(fd, buffer, (size_t)g_bytes, offset) != g_bytes) die("pread");
            sink += (uint8_t)buffer[i % g_bytes];
        }
        free(buffer);
        close(fd);
    } else if (job->work == GETPPID) {
        for (long i = 0; i < g_n; i++) sink += (uint64_t)getppid();
    } else {
        for (long i = 0; i < 50 * g_n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sink += x;
        }
    }
    job->sink = sink;
    return NULL;
}

/// Work per second on one thread, and on two threads at once (`first` and `second`).
static void one_and_two(enum Work work, const char *first, const char *second, double *one, double *two) {
    Job alone = {work, first, 0};
    double start = now_seconds();
    run(&alone);
    *one = (double)g_n / (now_seconds() - start);
    Job jobs[2] = {{work, first, 0}, {work, second, 0}};
    pthread_t threads[2];
    start = now_seconds();
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&threads[i], NULL, run, &jobs[i]) != 0) die("pthread_create");
    }
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    *two = 2.0 * (double)g_n / (now_seconds() - start);
}

static void make_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("open");
    char *bytes = malloc(FILE_BYTES);
    if (bytes == NULL) die("malloc");
    for (long i = 0; i < FILE_BYTES; i++) bytes[i] = (char)(i * 31);
    if (write(fd, bytes, FILE_BYTES) != FILE_BYTES) die("write");
    free(bytes);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: pread_threads DIR N BYTES ROUNDS\n");
        return 2;
    }
    const char *dir = argv[1];
    g_n = atol(argv[2]);
    g_bytes = atol(argv[3]);
    int rounds = atoi(argv[4]);
    if (g_n < 1 || g_bytes < 1 || g_bytes > FILE_BYTES || rounds < 1) {
        fprintf(stderr, "pread_threads: N and ROUNDS at least 1, BYTES from 1 to %d\n", FILE_BYTES);
        return 2;
    }
    mkdir(dir, 0755);
    char first[512], second[512];
    snprintf(first, sizeof first, "%s/first", dir);
    snprintf(second, sizeof second, "%s/second", dir);
    make_file(first);
    make_file(second);
    printf("round\twork\tone thread per s\ttwo threads per s\ttwo / one\n");
    for (int round = 0; round < rounds; round++) {
        struct { const char *label; enum Work work; const char *second; } cases[] = {
            {"pread, one file", PREAD, first},
            {"pread, two files", PREAD, second},
            {"getppid", GETPPID, first},
            {"no system call", COMPUTE, first},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            double one, two;
            one_and_two(cases[c].work, first, cases[c].second, &one, &two);
            printf("%d\t%s\t%.0f\t%.0f\t%.2f\n", round, cases[c].label, one, two, two / one);
        }
    }
    return 0;
}
