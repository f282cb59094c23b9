# Sourced by run.sh and cost.sh (from this folder): builds the C baseline and the Larder bench
# (or takes LARDER_BIN), then starts one memcached for the one-server rows and a pool of 3 more
# for the pool rows, each on a free loopback port, all stopped at exit by process id.
# Sets LARDER (the bench binary), port and server (the one server's port and process id),
# pool_ports (the pool's 3 ports, comma-separated, in the clients' server-list order) and
# pool_servers (the pool's process ids).
mkdir -p .build/compare results

gcc -O2 -Wall -Wextra -o .build/compare/baseline_libmemcached baseline_libmemcached.c -lmemcached
if [ -n "${LARDER_BIN:-}" ]; then
    LARDER="$LARDER_BIN"
else
    swift build -c release --product LarderMemcachedBench >&2
    LARDER="$(swift build -c release --show-bin-path)/LarderMemcachedBench"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
user_args=()
[ "$(id -u)" -eq 0 ] && user_args=(-u root)
server=""
pool_servers=()
stop_servers() { kill "$server" "${pool_servers[@]}" 2>/dev/null || true; }
trap stop_servers EXIT
# start_memcached PORT: starts one memcached and waits until it accepts; sets started (its id).
start_memcached() {
    memcached -l 127.0.0.1 -p "$1" -U 0 -m 256 -t 2 "${user_args[@]}" &
    started=$!
    for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $1))" 2>/dev/null && break; sleep 0.05; done
}
port=$(free_port)
start_memcached "$port"
server=$started
pool=()
while [ "${#pool[@]}" -lt 3 ]; do
    candidate=$(free_port)
    # (A port the OS hands out twice in a row would start a server that cannot bind.)
    [[ " $port ${pool[*]} " == *" $candidate "* ]] && continue
    start_memcached "$candidate"
    pool_servers+=("$started")
    pool+=("$candidate")
done
pool_ports=$(IFS=,; echo "${pool[*]}")
echo "one server on 127.0.0.1:$port; pool of 3 on 127.0.0.1:{$pool_ports}" >&2
