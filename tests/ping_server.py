"""A real HTTP server on 127.0.0.1 that records what it is sent: pings and webhook calls."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    """One request the server got."""

    method: str
    path: str
    body: str
    content_type: str


@dataclass
class PingServer:
    """Records every request; answers `status` (200 by default)."""

    status: int = 200
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> PingServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8") if length else ""
                with owner._lock:
                    owner.received.append(Received(self.command, self.path, body,
                                                   self.headers.get("Content-Type", "")))
                self.send_response(owner.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            do_GET = do_POST = do_HEAD = _record  # http.server's names

            def log_message(self, *args) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.received]

    def wait_for(self, predicate, timeout: float) -> bool:
        """Wait until `predicate(received)` holds; whether it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if predicate(list(self.received)):
                    return True
            time.sleep(0.2)
        return False


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (a server that is down)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/ping/abc"
