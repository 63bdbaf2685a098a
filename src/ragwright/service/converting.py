"""Files sent to the service, converted so that a client who leaves stops the work, and
kept on disk only while they convert.

- :func:`upload_folder`: a private temporary folder for one request's files, named for
  this process (``ragwright-upload-<pid>-...``) and removed however the request ends;
  :func:`remove_orphans`, run when the service starts, removes the folders of processes
  that are gone (a server killed mid-upload).
- :func:`converting`: the request's reading of its files, off the event loop; when the
  client disconnects, its :data:`~ragwright.cancelling.CANCEL` event is set, so the
  file's conversion process is killed within the conversion box's poll
  (``adapters/formats/box.py``), and the request ends ``499``.

Both upload routes (``POST /v1/ingestions/files`` and the page's ``/ui/ingest``) use
them; the conversion itself is bounded by ``adapters/formats/box.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from starlette.requests import Request

from ragwright.cancelling import cancelled_by
from ragwright.service.dependencies import until_disconnect

logger = logging.getLogger("ragwright.service")
T = TypeVar("T")

UPLOAD_PREFIX = "ragwright-upload-"
_OWNED = re.compile(rf"^{UPLOAD_PREFIX}(\d+)-")


@contextlib.contextmanager
def upload_folder() -> Iterator[Path]:
    """A new private folder (0700) for one request's files, removed on every exit."""
    folder = Path(tempfile.mkdtemp(prefix=f"{UPLOAD_PREFIX}{os.getpid()}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_orphans(root: Path | None = None) -> int:
    """Remove the upload folders under ``root`` (the temporary directory) whose process
    no longer runs; returns how many were removed."""
    removed = 0
    base = Path(root or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            owner = _OWNED.match(entry.name)
            if owner is None or not entry.is_dir() or _alive(int(owner.group(1))):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += not entry.exists()
    if removed:
        logger.info("removed %d upload folder(s) left by stopped processes", removed)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: not ours to judge
    return True


async def converting(request: Request, work: Callable[[], T]) -> T:
    """``work()`` (which reads the request's files) in a thread; when the client goes
    away before it ends, its conversions are stopped and the request ends ``499``."""
    cancel = threading.Event()
    with cancelled_by(cancel):
        task = asyncio.ensure_future(asyncio.to_thread(work))
    task.add_done_callback(_retrieve)
    try:
        return await until_disconnect(request, task)
    finally:
        if not task.done() or task.cancelled():
            cancel.set()  # the thread goes on until its conversion sees this


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Take a stopped conversion's exception (nobody awaits it any more)."""
    if not task.cancelled():
        task.exception()
