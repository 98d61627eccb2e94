"""Atomic file writes: the one way dsx replaces a file on disk.

A reader sees the old file or the new one, never part of either, and a crash leaves the old
one. The temporary file gets an unpredictable name in the target's folder (so the rename
stays on one filesystem) and is opened with O_CREAT|O_EXCL|O_NOFOLLOW: a link or file
planted at a guessable name, or a second writer, can never redirect the bytes. The file is
fsynced before the rename and the folder after it, so the new name survives a power loss.
A target that is itself a symbolic link is replaced by the file, never written through.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_file(path: str | Path, data: bytes | str, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` (text is UTF-8); `mode` is filtered by the umask, as for open().

    Raises OSError like open() does; callers map it to their own error naming the file.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    temporary, fd = _create_temporary(target, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(target.parent)


def _create_temporary(target: Path, mode: int) -> tuple[Path, int]:
    for _ in range(16):
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
        try:
            return temporary, os.open(temporary, _FLAGS, mode)
        except FileExistsError:
            continue  # 64 random bits taken: someone is guessing; draw again
    raise FileExistsError(f"{target}: no free temporary name next to it")


def _sync_folder(folder: Path) -> None:
    """Make the rename durable; some filesystems cannot sync a folder, which only costs durability."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
