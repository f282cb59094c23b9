#!/usr/bin/env python3
"""A loopback HTTP server on Python's http.server for LarderImage's resumable-download tests.

Serves the files of DIRECTORY with a strong ETag and a Last-Modified date, answers a single
`Range: bytes=N-` whose `If-Range` matches either validator with a 206 (any other range request
gets the whole file, as RFC 9110 allows), and cuts the connection after CUT body bytes on the
first response for each file. GET /__sent/<name> answers the body bytes sent for <name> so far.

Usage: range_server.py DIRECTORY CUT   (prints the port it listens on, then serves until its
standard input closes or it gets SIGTERM)
"""
import email.utils
import http.server
import os
import signal
import sys
import threading

# The test runner may start children with SIGTERM blocked or ignored; take the default back.
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
signal.signal(signal.SIGTERM, signal.SIG_DFL)

root, cut = sys.argv[1], int(sys.argv[2])
lock = threading.Lock()
sent = {}
requests = {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, headers, body):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        if self.path.startswith("/__sent/"):
            with lock:
                body = str(sent.get(self.path[len("/__sent/"):], 0)).encode()
            self.answer(200, [("Content-Length", str(len(body)))], body)
            return
        name = os.path.basename(self.path)
        try:
            with open(os.path.join(root, name), "rb") as file:
                data = file.read()
                status = os.fstat(file.fileno())
        except OSError:
            self.answer(404, [("Content-Length", "0")], b"")
            return
        etag = '"%x-%x"' % (status.st_mtime_ns, status.st_size)
        modified = email.utils.formatdate(status.st_mtime, usegmt=True)
        with lock:
            requests[name] = requests.get(name, 0) + 1
            number = requests[name]
        start, code = 0, 200
        headers = [("Content-Type", "image/png"), ("ETag", etag), ("Last-Modified", modified)]
        wanted, if_range = self.headers.get("Range", ""), self.headers.get("If-Range")
        if wanted.startswith("bytes=") and wanted.endswith("-") and wanted[6:-1].isdigit() and if_range in (etag, modified):
            start = int(wanted[6:-1])
            if start >= len(data):
                self.answer(416, [("Content-Range", "bytes */%d" % len(data)), ("Content-Length", "0")], b"")
                return
            code = 206
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data))))
        body = data[start:]
        headers.append(("Content-Length", str(len(body))))
        if number == 1:
            body = body[:cut]
        with lock:
            sent[name] = sent.get(name, 0) + len(body)
        self.answer(code, headers, body)


def exit_when_parent_goes():
    """Standard input closes when the test ends, or when the test process dies."""
    sys.stdin.buffer.read()
    os._exit(0)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=exit_when_parent_goes, daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
