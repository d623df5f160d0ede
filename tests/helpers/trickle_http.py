"""A slow mirror: serves the directory it runs in, but sends the file at PATH one byte a second
(its Content-Length announced in full), as a mirror on a failing link or a hostile one would.

    trickle_http.py PORT PATH
"""
import http.server
import os
import sys
import time

from quiet_http import serve

SLOW = sys.argv[2]


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path != SLOW:
            return super().do_GET()
        with open(self.translate_path(path), "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for b in body:
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(1)
        except (BrokenPipeError, ConnectionResetError):
            pass


if __name__ == "__main__":
    serve(sys.argv[1], Handler)
