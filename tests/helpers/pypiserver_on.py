#!/usr/bin/env python3
"""pypiserver (its own app and routes, configured by its own command-line parser) on a port the
OS picks, announced on the first line of stdout as http.server does, so that tests never race
other servers for a port they picked first.

usage: pypiserver_on.py [pypiserver run options …] PACKAGES_DIR
"""
import socketserver
import sys
import wsgiref.simple_server as ws

import pypiserver
from pypiserver.config import Config


class Server(socketserver.ThreadingMixIn, ws.WSGIServer):
    daemon_threads = True


class Quiet(ws.WSGIRequestHandler):
    def log_message(self, *args):
        pass


config = Config.from_args(["run", *sys.argv[1:]])
app = pypiserver.setup_routes_from_config(pypiserver.app_from_config(config), config)
server = ws.make_server("127.0.0.1", 0, app, server_class=Server, handler_class=Quiet)
print(f"Serving HTTP on 127.0.0.1 port {server.server_address[1]}", flush=True)
server.serve_forever()
