"""Files written whole or not at all (run records, configurations, checkpoints)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


@contextlib.contextmanager
def open_atomic(path, mode: str = "w"):
    """A file to write ``path`` through: a temporary file beside it, flushed to
    the disk and renamed over ``path`` when the block ends without an error
    (removed when it raises). A full disk or a kill mid-write leaves the
    previous file (or none), never a truncated one."""
    path = Path(path)
    # said of the path asked for: the rename would name the hidden temporary file instead
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {str(path)!r}: it is a folder; give a file name (inside it, say)")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {str(path)!r}: the folder {str(path.parent)!r} does not exist")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666: the umask applies, as for open()
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)  # the rename itself reaches the disk with the folder's entry
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def remove(path) -> None:
    """``path``, and any temporary that a write killed half-way left beside it."""
    path = Path(path)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)
    path.unlink(missing_ok=True)
