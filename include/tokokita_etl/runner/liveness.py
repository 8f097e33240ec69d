"""Whether the holder of a claim has ended: asked only where a claim or an intent is settled (the
gate's reconciliation and `settled_watermark`), never by the pure decisions of `policy`.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime


def cli_holder_finished(owner: str) -> bool | None:
    """Whether a command-line run `owner` (`cli:host:pid:start`) on this host has exited
    (None: not a command-line run of this host, so not ours to tell)."""
    parts = owner.split(":", 3)
    if len(parts) < 3 or parts[0] != "cli" or parts[1] != socket.gethostname():
        return None
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, PermissionError):
        return None
    return False


def cli_owner(started: datetime) -> str:
    """The claim owner of a command-line run: host and process, so a dead one is detected."""
    return f"cli:{socket.gethostname()}:{os.getpid()}:{started.isoformat(timespec='seconds')}"
