// Prints, for each key read from standard input (one per line), the index of the server that
// libmemcached picks with MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED for the servers given as arguments
// (`host:port:weight` each). The LarderMemcached placement tests compare Larder's ring with it.
//
//   cc ketama-reference.c -lmemcached -o ketama-reference
//   printf 'a\nb\n' | ./ketama-reference 127.0.0.1:11211:1 127.0.0.1:11212:2
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    memcached_st *memc = memcached_create(NULL);
    if (memc == NULL) return 2;
    for (int i = 1; i < argc; i++) {
        char host[256];
        unsigned port = 0, weight = 0;
        if (sscanf(argv[i], "%255[^:]:%u:%u", host, &port, &weight) != 3) {
            fprintf(stderr, "bad server '%s' (want host:port:weight)\n", argv[i]);
            return 2;
        }
        if (memcached_server_add_with_weight(memc, host, (in_port_t)port, weight) != MEMCACHED_SUCCESS) {
            fprintf(stderr, "cannot add server '%s'\n", argv[i]);
            return 2;
        }
    }
    if (memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS) return 2;
    char line[4096];
    while (fgets(line, sizeof line, stdin) != NULL) {
        size_t length = strcspn(line, "\n");
        printf("%u\n", memcached_generate_hash(memc, line, length));
    }
    memcached_free(memc);
    return 0;
}
