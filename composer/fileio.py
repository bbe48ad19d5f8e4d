"""Atomic file writes: a reader (another process, the next run after a crash) sees the old file or
the new one, never a half-written one.

The one implementation for every writer of whole files (the NVRTC cache, manifests, build
directories, sweep plans and logs, schedules rewritten by a sweep, result summaries); it sits
at the bottom of the package and imports nothing from it, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[Any]], None], *, binary: bool = False) -> None:
    """Write via ``write(fh)`` to a temp file in the target's directory, fsync it, ``os.replace``
    it over the target, then fsync the directory (so the rename itself survives a crash).

    ``fh`` is a text file (UTF-8, newlines written as given) or, with ``binary``, a binary one.
    If ``write`` or anything before the rename fails, the target is untouched and the temp file
    is removed. The temp file lives in the same directory because a rename is atomic only within
    one file system."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """``text`` as UTF-8, atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(text))


def atomic_write_json_compact(path: str | os.PathLike[str], document: Any) -> None:
    """``document`` as one line of JSON without spaces, atomically. For the machine-written data
    files that dominate the repository (model, predictions and score files: 0.1-0.7 MB each
    indented, 25-35 % less compact; the working tree travels to the GPU machine under a size
    limit); their hashes are over canonical JSON, so the layout of the file does not enter them."""
    import json

    atomic_write_text(path, json.dumps(document, separators=(",", ":")) + "\n")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` as it is, atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(data), binary=True)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable; best effort (some platforms cannot
    open or fsync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "fsync_dir"]


def emit_json(document: Any, out: str | os.PathLike[str] | None = None) -> None:
    """Print ``document`` as indented JSON on stdout and, with ``out``, write it there atomically
    (the measuring tools' output: a reader that closes the pipe early, ``| head``, ends the print
    quietly instead of raising)."""
    import json
    import sys

    text = json.dumps(document, indent=2)
    if out:
        atomic_write_text(Path(out), text + "\n")
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's flush at exit must not fail again
