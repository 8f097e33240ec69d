"""PostgreSQL for a test run: the server TOKOKITA_TEST_PG_URL names, or a throw-away one.

`provide(url)` returns the URL the tests use and the throw-away server behind it, if any:

* a server listens at the URL's host and port: that server; the URL's database is created when
  it is missing;
* nothing listens there: a throw-away cluster in a temporary folder (trust authentication, a
  free port on 127.0.0.1, its unix socket inside the folder), from the first PostgreSQL
  binaries found: Debian's (/usr/lib/postgresql/<version>/bin, package `postgresql`, which
  .ci/run installs when missing) or an `initdb` on PATH; none is an error saying how to get
  them. `ThrowawayServer.stop()` stops it and deletes the folder.

The root conftest calls `provide` from `pytest_configure` and exports the URL, so plain
`pytest` and `make test` behave alike and every subprocess a test starts sees the same server.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from stack.ports import free_port

DEBIAN_INSTALLS = Path("/usr/lib/postgresql")
MAINTENANCE_DATABASE = "postgres"
DEFAULT_SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
HOW_TO_PROVIDE = (
    "Provide PostgreSQL in one of these ways: start a server and point TOKOKITA_TEST_PG_URL at it "
    "(default postgresql+psycopg://postgres@127.0.0.1:5432/tokokita_test, trust authentication "
    "or a password in the URL); or install the server binaries (Debian: apt-get install "
    "postgresql) so that a throw-away server can be started for the run."
)
# the throw-away cluster trades durability for speed: its data is deleted after the run anyway
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class PostgresUnavailable(RuntimeError):
    """No server listens at the URL and no throw-away server could be started."""


def report(message: str) -> None:
    print(f"test PostgreSQL: {message}", file=sys.stderr, flush=True)


def provide(requested_url: str) -> tuple[str, ThrowawayServer | None]:
    """The URL the tests use (database created if missing), and the throw-away server if one
    had to be started (the caller stops it)."""
    url = make_url(requested_url)
    server = None
    if not _listens(url):
        binaries = find_binaries()
        server = ThrowawayServer(binaries, superuser=url.username or "postgres")
        server.start()
        report(f"nothing listens at {_address(url)}; started a throw-away server "
               f"({binaries.origin}) at 127.0.0.1:{server.port}, deleted after the run")
        url = url.set(host="127.0.0.1", port=server.port)
    try:
        if _ensure_database(url):
            report(f"created database {url.database} at {_address(url)}")
    except BaseException:
        if server is not None:
            server.stop()
        raise
    return url.render_as_string(hide_password=False), server


def _address(url: URL) -> str:
    return f"{url.host or 'the default unix socket'}:{url.port or 5432}"


def _listens(url: URL) -> bool:
    """Whether a server accepts connections at the URL's host and port (no login attempted)."""
    port = url.port or 5432
    if not url.host or url.host.startswith("/"):
        dirs = [url.host] if url.host else DEFAULT_SOCKET_DIRS
        return any((Path(d) / f".s.PGSQL.{port}").exists() for d in dirs)
    try:
        with socket.create_connection((url.host, port), timeout=3):
            return True
    except OSError:
        return False


def _ensure_database(url: URL) -> bool:
    """Create the URL's database when it is missing; True when it was created."""
    import psycopg
    from psycopg import errors, sql

    if not url.database or url.database == MAINTENANCE_DATABASE:
        return False
    admin = url.set(drivername="postgresql", database=MAINTENANCE_DATABASE, query={})
    try:
        with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True,
                             connect_timeout=10) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (url.database,)).fetchone()
            if exists:
                return False
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(url.database)))
            except errors.DuplicateDatabase:  # a concurrent run created it first
                return False
    except psycopg.Error as exc:
        raise PostgresUnavailable(
            f"PostgreSQL at {_address(url)} could not provide database {url.database!r}: "
            f"{exc}\n{HOW_TO_PROVIDE}") from exc
    return True


@dataclass(frozen=True)
class Binaries:
    """PostgreSQL's server programs: `bindir` holds initdb and pg_ctl; `install` is the tree
    they need beside them (libraries, share/), the unit to copy elsewhere."""

    bindir: Path
    install: Path
    origin: str


def find_binaries() -> Binaries:
    for binaries in _installed_binaries():
        if (binaries.bindir / "initdb").is_file() and (binaries.bindir / "pg_ctl").is_file():
            return binaries
    raise PostgresUnavailable(
        f"No PostgreSQL server binaries (initdb, pg_ctl) in {DEBIAN_INSTALLS}/<version>/bin or on "
        f"PATH, so no throw-away server can be started.\n{HOW_TO_PROVIDE}")


def _installed_binaries() -> Iterator[Binaries]:
    def version(bindir: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in bindir.parent.name.split(".") if part.isdigit())

    debian = sorted((p.parent for p in DEBIAN_INSTALLS.glob("*/bin/initdb")), key=version,
                    reverse=True)
    for bindir in debian:
        yield Binaries(bindir, bindir.parent, f"Debian's PostgreSQL {bindir.parent.name} binaries")
    if initdb := shutil.which("initdb"):
        bindir = Path(initdb).resolve().parent
        yield Binaries(bindir, bindir.parent, f"PostgreSQL binaries in {bindir}")


def _server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: this one, unless it is root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable("Running as root, and neither a 'postgres' nor a 'nobody' account "
                              "exists to run a throw-away PostgreSQL server.\n" + HOW_TO_PROVIDE)


class ThrowawayServer:
    """A PostgreSQL cluster in a temporary folder for one test run; `stop()` deletes it."""

    def __init__(self, binaries: Binaries, *, superuser: str, password: str | None = None) -> None:
        """`password`: the superuser's password, checked on TCP connections (SCRAM); None:
        trust authentication."""
        self.binaries = binaries
        self.password = password
        self.bindir = binaries.bindir
        self.superuser = superuser
        self.account = _server_account()
        self.root: Path | None = None
        self.port = 0
        self._running = False
        self._previous_sigterm = None

    @property
    def data(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tokokita-test-pg-"))
        atexit.register(self.stop)
        self._stop_on_sigterm()
        try:
            if self.account is not None:
                os.chown(self.root, self.account.pw_uid, self.account.pw_gid)
                self.bindir = self._bindir_for_account()
            auth = ["-A", "trust"]
            if self.password is not None:
                pwfile = self.root / "pwfile"
                pwfile.write_text(self.password + "\n", encoding="utf-8")
                if self.account is not None:
                    os.chown(pwfile, self.account.pw_uid, self.account.pw_gid)
                auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
            self._check(self._run("initdb", "-D", str(self.data), "-U", self.superuser, *auth,
                                  "-E", "UTF8", "--locale=C", "--no-sync"), "initdb")
            self._configure()
            for _ in range(3):  # the free port can be taken before the server binds it
                self.port = free_port()
                # its own session: ctrl-c in the terminal must not stop the server before the
                # tests' teardown and stop() have used it
                result = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                                   "-o", f"-p {self.port}", "-w", "-t", "60", "start",
                                   start_new_session=True)
                if result.returncode == 0:
                    self._running = True
                    return
            self._check(result, "pg_ctl start")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and delete its folder (safe to call more than once)."""
        if self.root is None:
            return
        try:
            if self._running:
                result = self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30",
                                   "stop")
                if result.returncode != 0:
                    self._kill_postmaster()
                self._running = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None

    def pg_ctl(self, *args: str, start_new_session: bool = False) -> subprocess.CompletedProcess:
        """`pg_ctl -D <data> args...` as the server's account, for tests that stop, restart or
        signal the server themselves (`start` and `stop` keep their own bookkeeping)."""
        return self._run("pg_ctl", "-D", str(self.data), *args,
                         start_new_session=start_new_session)

    def postmaster_pid(self) -> int | None:
        """The running postmaster's process id (None when the server is not running)."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _stop_on_sigterm(self) -> None:
        # SIGTERM becomes KeyboardInterrupt, so pytest unwinds and the cleanup runs as on ctrl-c
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, signal.default_int_handler)

    def _configure(self) -> None:
        socket_dir = str(self.root).replace("'", "''")
        settings = {"listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{socket_dir}'",
                    **FAST_SETTINGS}
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("".join(f"{name} = {value}\n" for name, value in settings.items()))

    def _bindir_for_account(self) -> Path:
        """The binaries, copied into the server's folder if the server account cannot run them
        where they are (e.g. a build under root's home)."""
        try:
            if self._run("initdb", "--version").returncode == 0:
                return self.bindir
        except PermissionError:
            pass
        assert self.root is not None
        copy = self.root / "install"
        shutil.copytree(self.binaries.install, copy, symlinks=True)
        return copy / self.bindir.relative_to(self.binaries.install)

    def _run(self, program: str, *args: str, start_new_session: bool = False,
             ) -> subprocess.CompletedProcess:
        account = {}
        if self.account is not None:
            account = {"user": self.account.pw_uid, "group": self.account.pw_gid,
                       "extra_groups": []}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        return subprocess.run([str(self.bindir / program), *args], cwd=self.root, env=env,
                              capture_output=True, text=True, check=False,
                              start_new_session=start_new_session, **account)

    def _check(self, result: subprocess.CompletedProcess, step: str) -> None:
        if result.returncode == 0:
            return
        log = self.root / "server.log" if self.root else None
        server_log = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
        raise PostgresUnavailable(
            f"The throw-away PostgreSQL server failed at {step} (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}{server_log}\n{HOW_TO_PROVIDE}")

    def _kill_postmaster(self) -> None:
        pid_file = self.data / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown; children exit with it
            for _ in range(50):
                os.kill(pid, 0)
                time.sleep(0.1)
