"""What the test servers share: a quiet request handler with a one-call reply, and serving."""
import http.server


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(port, handler):
    """Serve on 127.0.0.1:PORT (0: any free port), first saying which port, as http.server does."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
    print(f"Serving HTTP on 127.0.0.1 port {server.server_address[1]}", flush=True)
    server.serve_forever()
