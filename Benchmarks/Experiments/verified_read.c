// What verifying a large value costs against reading it, outside Larder: open + fstat + read
// of a file from the page cache into a fresh buffer (the raw row of compare.sh), then the same
// followed by CRC-32C over the buffer (Larder's checksum, from Sources/CLarderChecksum), then
// the read done in chunks with each chunk checked while it is still in the core's cache.
// Rounds rotate the order of the three; each reports thread CPU time per read, and the medians
// over rounds of the ratios to the raw read are printed last.
//
//   gcc -O2 -I Sources/CLarderChecksum/include -o /tmp/verified_read
//       Benchmarks/Experiments/verified_read.c Sources/CLarderChecksum/crc32c.c   (one line)
//   /tmp/verified_read DIR SIZE_BYTES READS ROUNDS      (e.g. /tmp/vr 1048576 2000 7)
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "CLarderChecksum.h"

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "verified_read: %s: %s\n", what, strerror(errno));
    exit(1);
}

static volatile uint32_t sink;

// mode 0: read; 1: read then CRC; 2: read in chunks of `chunk` bytes, CRC each after its read.
static double run(const char *path, size_t size, int reads, int mode, size_t chunk) {
    double start = thread_seconds();
    for (int i = 0; i < reads; i++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) die("open");
        struct stat st;
        if (fstat(fd, &st) != 0) die("fstat");
        uint8_t *buffer = malloc((size_t)st.st_size);  // a fresh buffer per read, as a cache hands out
        size_t got = 0;
        uint32_t crc = 0;
        while (got < size) {
            size_t want = mode == 2 && size - got > chunk ? chunk : size - got;
            ssize_t r = read(fd, buffer + got, want);
            if (r < 0) { if (errno == EINTR) continue; die("read"); }
            if (r == 0) break;
            if (mode == 2) crc = larder_crc32c(crc, buffer + got, (size_t)r);
            got += (size_t)r;
        }
        if (mode == 1) crc = larder_crc32c(0, buffer, got);
        close(fd);
        sink = crc ^ buffer[got / 2];
        free(buffer);
    }
    return (thread_seconds() - start) / reads;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s DIR SIZE_BYTES READS ROUNDS\n", argv[0]); return 2; }
    const char *dir = argv[1];
    size_t size = strtoull(argv[2], NULL, 10);
    int reads = atoi(argv[3]), rounds = atoi(argv[4]);
    if (size == 0 || reads <= 0 || rounds <= 0 || rounds > 64) { fprintf(stderr, "verified_read: bad arguments\n"); return 2; }
    mkdir(dir, 0700);
    char path[4096];
    snprintf(path, sizeof path, "%s/value", dir);
    uint8_t *value = malloc(size);
    for (size_t i = 0; i < size; i++) value[i] = (uint8_t)(i * 2654435761u >> 24);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, value, size) != (ssize_t)size || close(fd) != 0) die("writing the value");
    free(value);

    const char *names[] = {"read", "read+crc", "chunked 64 KiB", "chunked 256 KiB"};
    const int modes[] = {0, 1, 2, 2};
    const size_t chunks[] = {0, 0, 65536, 262144};
    enum { kinds = 4 };
    double ratios[kinds][64];
    run(path, size, reads / 10 + 1, 1, 0);  // warm the page cache and the allocator
    for (int round = 0; round < rounds; round++) {
        double seconds[kinds];
        for (int k = 0; k < kinds; k++) {
            int kind = (k + round) % kinds;
            seconds[kind] = run(path, size, reads, modes[kind], chunks[kind]);
        }
        printf("round %d:", round + 1);
        for (int kind = 0; kind < kinds; kind++) {
            printf("  %s %.1f us", names[kind], seconds[kind] * 1e6);
            ratios[kind][round] = seconds[0] / seconds[kind];
        }
        printf("\n");
    }
    printf("median speed against the raw read (%zu bytes, %d rounds):", size, rounds);
    for (int kind = 1; kind < kinds; kind++) {
        qsort(ratios[kind], (size_t)rounds, sizeof(double), compare_doubles);
        printf("  %s %.2f", names[kind], ratios[kind][rounds / 2]);
    }
    printf("\n");
    unlink(path);
    return 0;
}
