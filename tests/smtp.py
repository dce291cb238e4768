"""A small SMTP server on 127.0.0.1 for the email channel's tests: plain, STARTTLS or implicit
TLS (a throw-away CA and server certificate made with openssl), AUTH PLAIN, and a scripted
answer to the message data. It records each message and whether TLS was up when it came."""

from __future__ import annotations

import base64
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO


@dataclass
class Received:
    text: str
    tls: bool  # the message data came over TLS


@dataclass
class Login:
    user: str
    password: str
    tls: bool


def make_ca_and_cert(d: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, server.pem, server.key): a CA and a certificate for 127.0.0.1 and localhost."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
        "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr")  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem")  # fmt: skip
    return d / "ca.pem", d / "server.pem", d / "server.key"


class SmtpServer:
    """`security`: none | starttls (offered and required for AUTH) | tls (from the first byte).
    `offer_starttls=False` models a server (or a man in the middle) that strips STARTTLS."""

    def __init__(
        self,
        security: str = "none",
        cert: tuple[Path, Path] | None = None,
        reply_to_data: str = "250 ok",
        offer_starttls: bool = True,
    ) -> None:
        self.security = security
        self.reply_to_data = reply_to_data
        self.offer_starttls = offer_starttls
        self.messages: list[Received] = []
        self.logins: list[Login] = []
        self.context: ssl.SSLContext | None = None
        if cert is not None:
            self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.context.load_cert_chain(str(cert[0]), str(cert[1]))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        tls = False
        try:
            if self.security == "tls":
                assert self.context is not None
                conn = self.context.wrap_socket(conn, server_side=True)
                tls = True
            f = conn.makefile("rwb")
            self._say(f, "220 fake ESMTP")
            data: list[str] | None = None
            while raw := f.readline():
                line = raw.decode().rstrip("\r\n")
                if data is not None:
                    if line == ".":
                        self.messages.append(Received("\n".join(data), tls))
                        data = None
                        self._say(f, self.reply_to_data)
                    else:
                        data.append(line)
                    continue
                verb = line.split(" ", 1)[0].upper()
                if verb == "EHLO":
                    extensions = ["AUTH PLAIN"]
                    if self.security == "starttls" and self.offer_starttls and not tls:
                        extensions.append("STARTTLS")
                    lines = ["fake", *extensions]
                    for i, ext in enumerate(lines):
                        self._say(f, ("250 " if i == len(lines) - 1 else "250-") + ext)
                elif verb == "STARTTLS" and self.context is not None and not tls:
                    self._say(f, "220 go ahead")
                    f.close()
                    conn = self.context.wrap_socket(conn, server_side=True)
                    f = conn.makefile("rwb")
                    tls = True
                elif verb == "AUTH":
                    _, user, password = base64.b64decode(line.split()[2]).decode().split("\0")
                    self.logins.append(Login(user, password, tls))
                    self._say(f, "235 ok")
                elif verb == "DATA":
                    data = []
                    self._say(f, "354 go")
                elif verb == "QUIT":
                    self._say(f, "221 bye")
                    break
                else:
                    self._say(f, "250 ok")
        except (OSError, ssl.SSLError):
            pass  # the client gave up (e.g. it did not trust the certificate)
        finally:
            conn.close()

    @staticmethod
    def _say(f: BinaryIO, line: str) -> None:
        f.write(line.encode() + b"\r\n")
        f.flush()

    def close(self) -> None:
        self.sock.close()
