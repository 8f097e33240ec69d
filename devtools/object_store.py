"""A local S3-compatible server for the object-storage tests, benchmarks and throw-away
stacks: moto in server mode on 127.0.0.1, one process per use, with the standard AWS
environment that points a client at it (the pipeline reads credentials and the endpoint from
there, as it would on a real cloud).

moto keeps its objects in memory. With `keep` (`python -m devtools.object_store --port P
--keep FILE`) the server keeps them across a stop, as a real store does: on SIGTERM it stops
answering (connections are refused from then on), writes every bucket's objects to FILE and
exits; started again with the same FILE, it loads them before it listens. Written here
because moto has no such mode (its recorder replays requests, not state)."""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
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


REPO = Path(__file__).resolve().parents[1]
#: the account moto gives the test credentials
ACCOUNT = "123456789012"


def start_server(port: int, log: Path | None = None, *, new_session: bool = False,
                 keep: Path | None = None) -> subprocess.Popen:
    """Start moto's server on `port` and wait until it answers (RuntimeError if it does
    not within 30 s); with `keep`, one that keeps its objects in that file across a stop."""
    if keep is None:
        command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1",
                   "-p", str(port)]
    else:
        command = [sys.executable, "-m", "devtools.object_store", "--port", str(port),
                   "--keep", str(keep)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
    try:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
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


def _s3_backend():
    from moto.s3.models import s3_backends

    return s3_backends[ACCOUNT]["aws"]


def load_objects(path: Path) -> int:
    """Put the buckets and objects `dump_objects` wrote back into this process's moto."""
    if not path.exists():
        return 0
    backend = _s3_backend()
    buckets = pickle.loads(path.read_bytes())  # noqa: S301 (the file this module wrote)
    for bucket, (region, objects) in buckets.items():
        backend.create_bucket(bucket, region)
        for key, value in objects.items():
            backend.put_object(bucket, key, value)
    return sum(len(objects) for _, objects in buckets.values())


def dump_objects(path: Path) -> int:
    """Write every bucket's objects (their latest versions) of this process's moto to
    `path`, atomically."""
    backend = _s3_backend()
    buckets = {name: (bucket.region_name, {key: obj.value for key, obj in bucket.keys.items()})
               for name, bucket in backend.buckets.items()}
    part = path.with_name(path.name + ".part")
    part.write_bytes(pickle.dumps(buckets))
    part.replace(path)
    return sum(len(objects) for _, objects in buckets.values())


def main(argv: list[str] | None = None) -> None:
    """Serve on 127.0.0.1:--port, the objects kept in --keep across a stop (SIGTERM)."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    parser = argparse.ArgumentParser(prog="python -m devtools.object_store")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--keep", type=Path, required=True)
    args = parser.parse_args(argv)
    loaded = load_objects(args.keep)
    server = ThreadedMotoServer("127.0.0.1", args.port, verbose=False)
    server.start()
    print(f"object store on 127.0.0.1:{args.port}, {loaded} objects loaded", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    server.stop()
    server._server.server_close()  # new connections are refused from here on
    time.sleep(1)  # the requests it had accepted finish (their handler threads are daemons)
    print(f"stopped, {dump_objects(args.keep)} objects kept in {args.keep}", flush=True)


if __name__ == "__main__":
    main()
