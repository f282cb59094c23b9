// The C baseline for Larder's remote tier: libmemcached (Debian libmemcached-dev) against the
// same server and keys. Prints one TSV line per measurement: contender, operation, in-flight,
// operations per second.
//
//   cc -O2 -o baseline_libmemcached baseline_libmemcached.c -lmemcached
//   ./baseline_libmemcached PORT OPS [ONLY]   (ONLY: get1, mget or set1 runs just that measurement)
//   ./baseline_libmemcached PORT,PORT,PORT OPS [ONLY]
//
// With several ports it is a pooled client over 127.0.0.1 on each port, in that order, with
// MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (the placement Larder's pool reproduces), weights 1, and
// names its rows `libmemcached-pool`; its multi-get sends each server its part of the 32 keys.
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

#define KEYS 1000

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) { fprintf(stderr, "usage: %s PORT OPS [get1|mget|set1]\n", argv[0]); return 2; }
    long ops = atol(argv[2]);
    const char *only = argc == 4 ? argv[3] : NULL;
#define RUNS(name) (only == NULL || strcmp(only, name) == 0)
    int pooled = strchr(argv[1], ',') != NULL;
    const char *name = pooled ? "libmemcached-pool" : "libmemcached";
    memcached_st *mc = memcached_create(NULL);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    if (pooled && memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS) {
        fprintf(stderr, "cannot set MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED\n");
        return 1;
    }
    for (char *port = strtok(argv[1], ","); port != NULL; port = strtok(NULL, ",")) {
        if (memcached_server_add_with_weight(mc, "127.0.0.1", (in_port_t)atoi(port), 1) != MEMCACHED_SUCCESS) {
            fprintf(stderr, "cannot add server 127.0.0.1:%s\n", port);
            return 1;
        }
    }
    char keys[KEYS][32];
    size_t lengths[KEYS];
    char value[100];
    memset(value, 'v', sizeof value);
    for (int i = 0; i < KEYS; i++) {
        lengths[i] = (size_t)snprintf(keys[i], sizeof keys[i], "c:key-%d", i);
        if (memcached_set(mc, keys[i], lengths[i], value, sizeof value, 0, 0) != MEMCACHED_SUCCESS) {
            fprintf(stderr, "set failed\n");
            return 1;
        }
    }
    double start;
    // get, 1 in flight
    if (RUNS("get1")) {
        start = now();
        for (long i = 0; i < ops; i++) {
            size_t length; uint32_t flags; memcached_return_t rc;
            char *got = memcached_get(mc, keys[i % KEYS], lengths[i % KEYS], &length, &flags, &rc);
            if (!got || length != sizeof value) { fprintf(stderr, "get failed\n"); return 1; }
            free(got);
        }
        printf("%s\tget\t1\t%.0f\n", name, ops / (now() - start));
    }
    // get, 32 keys per multi-get
    if (RUNS("mget")) {
        start = now();
        long fetched = 0;
        for (long i = 0; i < ops; i += 32) {
            const char *batch[32]; size_t batchLengths[32];
            for (int j = 0; j < 32; j++) { batch[j] = keys[(i + j) % KEYS]; batchLengths[j] = lengths[(i + j) % KEYS]; }
            if (memcached_mget(mc, batch, batchLengths, 32) != MEMCACHED_SUCCESS) { fprintf(stderr, "mget failed\n"); return 1; }
            memcached_result_st *result;
            memcached_return_t rc;
            while ((result = memcached_fetch_result(mc, NULL, &rc)) != NULL) {
                fetched++;
                memcached_result_free(result);
            }
        }
        if (fetched < ops) { fprintf(stderr, "mget fetched %ld of %ld\n", fetched, ops); return 1; }
        printf("%s\tget\t32\t%.0f\n", name, fetched / (now() - start));
    }
    // set, 1 in flight
    if (RUNS("set1")) {
        start = now();
        for (long i = 0; i < ops; i++) {
            if (memcached_set(mc, keys[i % KEYS], lengths[i % KEYS], value, sizeof value, 0, 0) != MEMCACHED_SUCCESS) {
                fprintf(stderr, "set failed\n"); return 1;
            }
        }
        printf("%s\tset\t1\t%.0f\n", name, ops / (now() - start));
    }
    memcached_free(mc);
    return 0;
}
