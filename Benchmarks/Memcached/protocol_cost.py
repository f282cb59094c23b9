"""What the memcached server itself spends per key on a 32-key read, by request form.

Sends the same batches of 32 keys of 100-byte values in several forms (one classic `get` of
32 keys; 32 quiet meta `mg` lines ended by `mn`, with and without the flags Larder sends) and
reports the server's CPU per key (its utime + stime from /proc, 10 ms ticks: keep BATCHES large).
The client is Python, and its own time does not count.

    memcached -l 127.0.0.1 -p PORT -U 0 -t 2 &
    python3 protocol_cost.py PORT $! [BATCHES]     (BATCHES defaults to 20000)
"""
import os
import socket
import sys


def main() -> None:
    port, server = int(sys.argv[1]), int(sys.argv[2])
    batches = int(sys.argv[3]) if len(sys.argv) > 3 else 20_000
    tick = 1 / os.sysconf("SC_CLK_TCK")

    def server_cpu() -> float:
        fields = open(f"/proc/{server}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * tick

    connection = socket.create_connection(("127.0.0.1", port))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    value = b"v" * 100
    keys = [b"p:key-%d" % i for i in range(1_000)]
    for key in keys:
        connection.sendall(b"set %s 0 0 100\r\n%s\r\n" % (key, value))
        if connection.recv(100) != b"STORED\r\n":
            sys.exit("set failed")

    def batch_keys(batch: int) -> list:
        return [keys[(batch * 32 + j) % 1_000] for j in range(32)]

    forms = [
        ("get k1 … k32", lambda b: b"get " + b" ".join(batch_keys(b)) + b"\r\n", b"END\r\n"),
        ("mg k v q (×32), mn", lambda b: b"".join(b"mg %s v q\r\n" % k for k in batch_keys(b)) + b"mn\r\n", b"MN\r\n"),
        ("mg k v t c q O<n> (×32), mn (Larder's flags)",
         lambda b: b"".join(b"mg %s v t c q O%d\r\n" % (k, j + 1) for j, k in enumerate(batch_keys(b))) + b"mn\r\n",
         b"MN\r\n"),
    ]
    print("| request form | server CPU µs per key |")
    print("|---|---:|")
    for name, make, end in forms:
        requests = [make(b) for b in range(batches)]
        before = server_cpu()
        for request in requests:
            connection.sendall(request)
            reply = b""
            while not reply.endswith(end):
                reply += connection.recv(1 << 16)
        print(f"| {name} | {(server_cpu() - before) / batches / 32 * 1e6:.2f} |")


if __name__ == "__main__":
    main()
