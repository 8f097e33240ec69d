"""A real SMTP server on 127.0.0.1 (aiosmtpd) that records the mails it is sent."""

from __future__ import annotations

import email
import email.policy
import socket
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage


@dataclass(frozen=True)
class Mail:
    """One mail the server got."""

    sender: str
    recipients: tuple[str, ...]
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def text(self) -> str:
        """The mail's body (its first text part, decoded)."""
        part = self.message.get_body(preferencelist=("html", "plain"))
        return part.get_content() if part is not None else ""


@dataclass
class SmtpServer:
    """Accepts every mail (no TLS, no authentication) and records it."""

    received: list[Mail] = field(default_factory=list)
    port: int = 0
    _controller: object | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> SmtpServer:
        from aiosmtpd.controller import Controller

        owner = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                message = email.message_from_bytes(envelope.content, policy=email.policy.default)
                with owner._lock:
                    owner.received.append(Mail(envelope.mail_from, tuple(envelope.rcpt_tos),
                                               message))
                return "250 Message accepted for delivery"

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        controller.start()
        self._controller = controller
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()

    def connection_uri(self, from_email: str = "etl@tokokita.test") -> str:
        """An Airflow connection (JSON, for `AIRFLOW_CONN_<ID>`) to this server."""
        import json

        return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": self.port,
                           "extra": {"disable_tls": True, "disable_ssl": True,
                                     "from_email": from_email, "timeout": 10,
                                     "retry_limit": 1}})

    def mails(self) -> list[Mail]:
        with self._lock:
            return list(self.received)

    def wait_for(self, count: int, timeout: float) -> list[Mail]:
        """The mails once there are `count` (or what came within `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.mails()) < count:
            time.sleep(0.1)
        return self.mails()
