"""A mirror front that sends every request elsewhere: 302 to TARGET + the path asked for.

    redirect_http.py PORT TARGET
"""
import sys

from quiet_http import Handler, serve

TARGET = sys.argv[2].rstrip("/")


class Redirect(Handler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", TARGET + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()


if __name__ == "__main__":
    serve(sys.argv[1], Redirect)
