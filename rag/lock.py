"""One writer per index: a file lock next to it, and a note of who holds it.

Every write path (ingest, rebuild, remove) holds the lock; readers never take it,
so searches and chats go on during an ingest. While a writer holds the lock, an
owner file names it (pid, command, start). The owner file is removed when the
writer finishes; finding it with the lock free means a writer was killed mid-write,
and the next open repairs what it may have left half-done.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from filelock import FileLock, Timeout

from .errors import LockedError

# How long a second writer waits before it says who holds the index.
NOTICE_SECONDS = 1.0


class WriteLock:
    def __init__(self, data_dir: Path, name: str):
        self._lock = FileLock(str(data_dir / f"{name}.lock"))
        self.owner_file = data_dir / f"{name}.writer"
        self._dir = data_dir

    def holder(self) -> str:
        try:
            o = json.loads(self.owner_file.read_text(encoding="utf-8"))
            since = time.strftime("%H:%M:%S", time.localtime(o["since"]))
            return f"pid {o['pid']} ({o['command']}, since {since})"
        except (OSError, ValueError, KeyError, TypeError):
            return "another rag process"

    @contextmanager
    def hold(self, wait: bool = False, notice: Callable[[str], None] | None = None) -> Iterator[None]:
        """Hold the lock for a write. Busy: with ``wait`` tell ``notice`` who holds it
        and wait; without, raise :class:`LockedError` naming the holder."""
        self._dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=NOTICE_SECONDS)
        except Timeout:
            who = self.holder()
            if not wait:
                raise LockedError(f"{who} is writing to the index in {self._dir}; run again when "
                                  "it ends, or add --wait to wait for it") from None
            if notice:
                notice(f"waiting for {who}, which is writing to the index")
            self._lock.acquire()
        try:
            self.owner_file.write_text(json.dumps({
                "pid": os.getpid(), "command": " ".join(["rag", *sys.argv[1:]])[:200],
                "since": time.time()}), encoding="utf-8")
            yield
            self.owner_file.unlink(missing_ok=True)
        finally:
            self._lock.release()

    def writer_died(self) -> bool:
        """A writer's note is there but nobody holds the lock: it was killed."""
        try:
            owner = json.loads(self.owner_file.read_text(encoding="utf-8")).get("pid")
        except (OSError, ValueError, AttributeError):
            owner = None
        if owner == os.getpid() or not self.owner_file.exists():
            return False  # no writer, or this process is the writer
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            return False  # a live writer: not ours to repair
        try:
            return self.owner_file.exists()
        finally:
            self._lock.release()

    def clear(self) -> None:
        self.owner_file.unlink(missing_ok=True)
