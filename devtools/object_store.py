"""A local S3-compatible server for the object-storage tests, benchmarks and throw-away
stacks: moto in server mode on 127.0.0.1, one process per use, with the standard AWS
environment that points a client at it (the pipeline reads credentials and the endpoint from
there, as it would on a real cloud)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stack.ports import free_port


@dataclass(frozen=True)
class S3Server:
    """A running server: its endpoint and the environment a client needs."""

    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

    def create_bucket(self, name: str) -> None:
        import boto3

        env = self.env
        client = boto3.client("s3", endpoint_url=self.endpoint,
                              aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                              region_name=env["AWS_DEFAULT_REGION"])
        client.create_bucket(Bucket=name)


def start_server(port: int, log: Path | None = None, *,
                 new_session: bool = False) -> subprocess.Popen:
    """Start moto's server on `port` and wait until it answers (RuntimeError if it does
    not within 30 s)."""
    server = Path(sys.executable).with_name("moto_server")
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
    try:
        process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=new_session)
    finally:
        if log:
            out.close()
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()  # noqa: S310
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto_server did not start on {endpoint}") from None
            time.sleep(0.1)


@contextlib.contextmanager
def s3_server(log: Path | None = None) -> Iterator[S3Server]:
    """Start moto's server on a free port; stop it on exit."""
    port = free_port()
    process = start_server(port, log)
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)
