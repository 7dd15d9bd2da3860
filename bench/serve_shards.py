#!/usr/bin/env python3
"""Serves a folder on 127.0.0.1 over HTTP/1.1 with Range, HEAD and ETag, and
optionally delays every response: the remote-shard figures of
docs/BENCHMARKS.md (what a far-away object store adds per request).

    python3 bench/serve_shards.py DIR PORT [--delay SECONDS]
"""
import argparse
import os
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_handler(root, delay):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, body):
            if delay > 0:
                time.sleep(delay)
            path = os.path.join(root, self.path.lstrip("/"))
            if ".." in self.path or not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size = os.path.getsize(path)
            a, b = 0, size
            m = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            ranged = m is not None and int(m.group(1)) < size
            if ranged:
                a = int(m.group(1))
                if m.group(2):
                    b = min(size, int(m.group(2)) + 1)
            self.send_response(206 if ranged else 200)
            self.send_header("Content-Length", str(b - a))
            self.send_header("ETag", '"%x-%x"' % (size, int(os.path.getmtime(path))))
            self.send_header("Accept-Ranges", "bytes")
            if ranged:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b - 1, size))
            self.end_headers()
            if not body:
                return
            with open(path, "rb") as f:
                f.seek(a)
                left = b - a
                while left:
                    chunk = f.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)

        def do_GET(self):
            self.answer(True)

        def do_HEAD(self):
            self.answer(False)

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("port", type=int)
    p.add_argument("--delay", type=float, default=0.0)
    o = p.parse_args()
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", o.port), make_handler(o.dir, o.delay)).serve_forever()


if __name__ == "__main__":
    main()
