# Sourced by run.sh and cost.sh (from this folder): builds the C baseline and the Larder bench
# (or takes LARDER_BIN), then starts a memcached on a free loopback port, stopped at exit.
# Sets LARDER (the bench binary), port and server (memcached's process id).
mkdir -p .build/compare results

gcc -O2 -Wall -Wextra -o .build/compare/baseline_libmemcached baseline_libmemcached.c -lmemcached
if [ -n "${LARDER_BIN:-}" ]; then
    LARDER="$LARDER_BIN"
else
    swift build -c release --product LarderMemcachedBench >&2
    LARDER="$(swift build -c release --show-bin-path)/LarderMemcachedBench"
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
user_args=()
[ "$(id -u)" -eq 0 ] && user_args=(-u root)
memcached -l 127.0.0.1 -p "$port" -U 0 -m 256 -t 2 "${user_args[@]}" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break; sleep 0.05; done
