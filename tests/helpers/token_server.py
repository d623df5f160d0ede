#!/usr/bin/env python3
"""A minimal Docker registry token server for tests (the `WWW-Authenticate: Bearer` flow).

Issues ES256 JWTs with an x5c header for distribution's `auth.token` (rootcertbundle = CERT),
granting every requested action, to requests carrying the expected basic credentials.
Signatures come from the openssl command line; no Python crypto library is needed.

usage: token_server.py PORT KEY.pem CERT.pem ISSUER SERVICE USER:PASSWORD
"""
import base64, json, subprocess, sys, time, urllib.parse, uuid

import quiet_http

port, key, cert, issuer, service, userpass = sys.argv[1:7]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_to_raw(der):
    # ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } -> r || s, 32 bytes each
    def integer(buf, i):
        assert buf[i] == 0x02
        n = buf[i + 1]
        return int.from_bytes(buf[i + 2:i + 2 + n], "big"), i + 2 + n
    i = 2 if der[1] < 0x80 else 3
    r, i = integer(der, i)
    s, _ = integer(der, i)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def cert_der():
    pem = open(cert).read()
    body = "".join(l for l in pem.splitlines() if "-----" not in l)
    return body  # standard base64 of the DER, as x5c wants


def token(scopes):
    access = []
    for scope in scopes:
        kind, name, actions = scope.split(":", 2) if scope.count(":") >= 2 else (scope, "", "")
        access.append({"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]})
    now = int(time.time())
    header = {"typ": "JWT", "alg": "ES256", "x5c": [cert_der()]}
    claims = {"iss": issuer, "sub": userpass.split(":")[0], "aud": service, "exp": now + 600, "nbf": now - 60,
              "iat": now, "jti": str(uuid.uuid4()), "access": access}
    signing_input = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())).encode()
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input, capture_output=True, check=True).stdout
    return signing_input.decode() + "." + b64url(der_to_raw(der))


class Handler(quiet_http.Handler):
    def do_GET(self):
        expected = "Basic " + base64.b64encode(userpass.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            return
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        self.reply(200, json.dumps({"token": token(query.get("scope", [])), "expires_in": 600}).encode())


quiet_http.serve(port, Handler)
