"""Atomic file writes (a temporary name in the same folder, fsync, then rename) and the
exclusive lock file that serialises read-modify-write cycles.

Every file written here is created as a plain `open()` creates one: mode 0666 less the
process's umask (0644 under the usual umask 022), so gold, quarantine and state files can be
read by the other accounts the umask lets read them (a BI tool, a colleague), whichever way the
pipeline runs. `tempfile.mkstemp` would make them 0600, and the rename keeps that mode.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

#: errors only a write raises, which the OS reports without a file name (a full disk, a
#: quota, a file too large): the file being written is then the one to name
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
#: the permissions `open()` asks for when it creates a file; the umask takes its bits off
CREATE_MODE = 0o666


def create_sibling(path: Path) -> tuple[int, str]:
    """Create and open a new, empty temporary file next to `path` (`.<name>.<random>.tmp`).

    Like `tempfile.mkstemp` (exclusive creation, a name nobody else holds) but with the mode
    a plain `open()` gives: CREATE_MODE less the umask. Returns the descriptor and the name.
    """
    path = Path(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, CREATE_MODE), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name next to it", str(path))


@contextlib.contextmanager
def naming_write_errors(path: Path | str) -> Iterator[None]:
    """Re-raise a write error without a file name (`WRITE_ERRNOS`) as one naming `path`."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno in WRITE_ERRNOS:
            raise OSError(exc.errno, os.strerror(exc.errno), str(path)) from exc
        raise


@contextlib.contextmanager
def atomic_writer(path: Path, *, mode: str = "w", encoding: str | None = "utf-8",
                  newline: str | None = None) -> Iterator[IO]:
    """Open a temporary sibling of `path`; rename it over `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_sibling(path)
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": newline}
        with naming_write_errors(path), os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    with atomic_writer(path) as handle:
        handle.write(text)


def write_new_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path`, or `path-2`, `path-3`... atomically, never replacing a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_sibling(path)
    try:
        with naming_write_errors(path), os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        candidate, n = path, 1
        while True:
            try:
                os.link(tmp, candidate)  # link() fails if the name exists: no overwrite, no race
                return candidate
            except FileExistsError:
                n += 1
                candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _fsync_path(path: str) -> None:
    """fsync the file at `path` (opened again: its writer may have replaced it)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling path for another writer (a library that opens the file
    itself: Arrow's own file writes need no Python call, nor its lock, per chunk); fsync
    what it wrote and rename it over `path` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_sibling(path)
    os.close(fd)
    try:
        with naming_write_errors(path):
            yield Path(tmp)
            _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


#: a working run holds a state lock for milliseconds: a wait longer than this is a holder
#: that is stuck (stopped, or on a hung file system), which the waiting run says
LOCK_QUIET_WAIT_S = 2.0


def _lock_saying_when_held(lock: IO, lock_path: Path) -> None:
    """An exclusive `flock` on `lock`, waiting as long as it takes; a wait past
    LOCK_QUIET_WAIT_S is logged once, naming the lock file."""
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    # held: wait in the kernel (woken the moment it is free); a timer says so if it is long
    warning = threading.Timer(
        LOCK_QUIET_WAIT_S, logging.getLogger(__name__).warning,
        args=("waiting for %s: another process has held it for %.0f s", lock_path,
              LOCK_QUIET_WAIT_S))
    warning.daemon = True
    warning.start()
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
    finally:
        warning.cancel()


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_path` (created when missing) for the block."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as lock:
        _lock_saying_when_held(lock, lock_path)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
