"""A hostile mirror: serves a site root as it is (the directory it runs in), but answers 200,
with a 1 MiB body, for every root version `current/airlock/trust/N.root.json` it does not hold,
so that a node reading "until a 404" never stops. Each such request is counted, one line per
request, in the file named by its second argument.

    endless_roots.py PORT COUNT_FILE
"""
import http.server
import os
import re
import sys

from quiet_http import serve

COUNT = sys.argv[2]
BODY = b'{"signatures": [], "signed": {"_type": "root", "version": 0, "pad": "' + b"x" * ((1 << 20) - 80) + b'"}}'


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if re.fullmatch(r"/current/airlock/trust/\d+\.root\.json", path) and not os.path.exists(
            self.translate_path(path)
        ):
            with open(COUNT, "a") as f:
                f.write(path + "\n")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
            return
        super().do_GET()


if __name__ == "__main__":
    serve(sys.argv[1], Handler)
