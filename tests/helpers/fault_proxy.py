#!/usr/bin/env python3
"""A reverse proxy that fails the way real registries and mirrors fail:
fault_proxy.py PORT UPSTREAM [--flaky] [--truncate SUBSTR] [--corrupt SUBSTR] [--endless SUBSTR]
               [--ignore-range] [--fail-patch N] [--log]

--flaky         the first request of every path answers 503, the second 429 with
                `Retry-After: 1`; the third is forwarded.
--truncate S    the first GET from byte 0 of a path containing S sends the headers with the full
                Content-Length, half the body, and closes the connection.
--corrupt S     every GET of a path containing S has one byte of its body flipped.
--endless S     every GET of a path containing S sends its body, then zeros without end
                (no Content-Length, the connection held open; 60 s or 1 GiB at most).
--ignore-range  requests are forwarded without their Range header: the whole body comes back
                with 200, as from a server or proxy that does not do ranges.
--fail-patch N  the Nth PATCH (an upload chunk) is read and answered 503, not forwarded.
--log           print `METHOD PATH` of every request on stderr (to count round trips).
Everything else (method, path, headers, body) is forwarded to UPSTREAM as is. Counts of what
was done are printed on stderr."""
import http.client, sys, threading, time, urllib.parse
import quiet_http

port, upstream = sys.argv[1], urllib.parse.urlsplit(sys.argv[2])
args = sys.argv[3:]
flaky = "--flaky" in args
truncate = args[args.index("--truncate") + 1] if "--truncate" in args else None
corrupt = args[args.index("--corrupt") + 1] if "--corrupt" in args else None
endless = args[args.index("--endless") + 1] if "--endless" in args else None
ignore_range = "--ignore-range" in args
# A resumed request answered 206 with the whole body and no Content-Range (with --ignore-range).
fake_206 = "--fake-206" in args
log = "--log" in args
fail_patch = int(args[args.index("--fail-patch") + 1]) if "--fail-patch" in args else None
seen, lock = {}, threading.Lock()
patches = [0]


class Proxy(quiet_http.Handler):
    protocol_version = "HTTP/1.1"

    def forward(self):
        if log:
            print(f"{self.command} {self.path}", file=sys.stderr, flush=True)
        with lock:
            n = seen.get((self.command, self.path), 0)
            seen[(self.command, self.path)] = n + 1
        # The request's body is read whatever the answer: left unread on a kept-alive
        # connection, it would be taken for the next request.
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if flaky and n == 0:
            return self.fail(503, {})
        if flaky and n == 1:
            return self.fail(429, {"Retry-After": "1"})
        if self.command == "PATCH" and fail_patch:
            with lock:
                patches[0] += 1
                nth = patches[0]
            if nth == fail_patch:
                print(f"failed PATCH {nth}", file=sys.stderr, flush=True)
                return self.fail(503, {})
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
        dropped = ("host", "connection") + (("range",) if ignore_range else ())
        headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
        headers["Host"] = upstream.netloc
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        # From byte 0: no Range, or oci-client's `bytes=0-`.
        whole = self.headers.get("Range") in (None, "bytes=0-")
        first_full = self.command == "GET" and whole and n == (2 if flaky else 0)
        cut = truncate and truncate in self.path and first_full and len(data) > 1 and resp.status in (200, 206)
        if corrupt and corrupt in self.path and self.command == "GET" and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        if endless and endless in self.path and self.command == "GET" and resp.status in (200, 206):
            return self.endless(resp, data)
        status = 206 if fake_206 and not whole and self.command == "GET" and resp.status == 200 else resp.status
        self.send_response(status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length") + (("content-range",) if fake_206 else ()):
                if k.lower() == "location":
                    # Keep the client on the proxy (what nginx's proxy_redirect does).
                    v = v.replace(f"//{upstream.netloc}/", f"//{self.headers.get('Host', upstream.netloc)}/")
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if cut:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data[: len(data) // 2] if cut else data)
        if cut:
            self.wfile.flush()
            self.close_connection = True
            print(f"truncated {self.path}", file=sys.stderr, flush=True)

    def endless(self, resp, data):
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        chunk, sent, start = b"\0" * (1 << 20), 0, time.time()
        try:
            self.wfile.write(data)
            while sent < (1 << 30) and time.time() - start < 60:
                self.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
        print(f"endless {self.path}: {sent} bytes past the body", file=sys.stderr, flush=True)

    def fail(self, code, headers):
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = forward


quiet_http.serve(port, Proxy)
