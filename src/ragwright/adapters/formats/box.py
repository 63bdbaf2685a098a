"""The conversion box: a file converted in a forked child process that can be stopped.

A converter handed a hostile file (a Word file whose XML inflates to a gigabyte, a PDF
of 20,000 pages, a font program PDFium chokes on) must cost the process that serves
everyone nothing but a refusal. So every PDF and Word file, and every other file over
:data:`IN_PROCESS_BYTES`, is converted in a child forked for it:

- **Bounded.** The child runs under ``RLIMIT_AS`` (its address space may grow by
  ``memory_bytes``) and ``RLIMIT_CPU`` (``seconds``), and the parent kills it once
  ``seconds`` of wall time have passed; the converters check the other limits while they
  read (:mod:`~ragwright.adapters.formats.limits`). Each refusal names its setting.
- **Stoppable.** A caller that goes away (an HTTP client that disconnects) sets the
  :data:`~ragwright.cancelling.CANCEL` event of its context; the parent sees it within
  :data:`POLL_SECONDS`, kills the child and raises :class:`~ragwright.errors.ConversionCancelled`.
- **Its memory returned.** The child exits (or is killed) after one file, so whatever
  it allocated goes back to the system; it runs in a session of its own, so a process
  it started (``tesseract`` for OCR) is killed with it.
- **Shared and bounded in number.** Every conversion of the process (the CLI's folder,
  the HTTP upload routes, the page's form) takes one of ``workers`` slots first.
- **Trusted only as data.** The child's reply is unpickled with only the converted
  document's classes allowed, so a child taken over by its input cannot make the
  parent run anything.

Small text files (Markdown, plain text, HTML up to :data:`IN_PROCESS_BYTES`) convert in
process: their cost is bounded by their size, and a fork for each of a corpus's
thousands of notes would cost more than converting them.
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
import pickle
import resource
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from ragwright.adapters.formats.converted import ConvertedDocument
from ragwright.adapters.formats.limits import (
    MIB,
    ConversionLimits,
    check_size,
    over_limit,
)
from ragwright.cancelling import CANCEL
from ragwright.errors import (
    ConversionCancelled,
    DocumentError,
    SourceError,
    UnreadableKind,
    UnreadableSource,
)
from ragwright.forking import close_inherited, flush_streams, start_child

Converter = Callable[[Path, ConversionLimits], ConvertedDocument]

IN_PROCESS_BYTES = MIB
BOXED_SUFFIXES = frozenset({".pdf", ".docx"})
POLL_SECONDS = 0.05


def convert(path: Path, converter: Converter, limits: ConversionLimits) -> ConvertedDocument:
    """``converter(path, limits)``'s document, within ``limits`` (see the module docs).

    Raises:
        UnreadableSource: the converter's own refusals, and ``over_limit`` for a file
            past a limit (its reason names the setting).
        ConversionCancelled: the caller's :data:`CANCEL` event was set.
    """
    size = check_size(path, limits)
    cancel = CANCEL.get()
    if path.suffix.lower() not in BOXED_SUFFIXES and size <= IN_PROCESS_BYTES:
        return converter(path, limits)
    with _slot(limits.workers, cancel):
        return _in_child(path, converter, limits, cancel)


@cache
def _slots(workers: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(workers)


@contextlib.contextmanager
def _slot(workers: int, cancel: threading.Event | None) -> Iterator[None]:
    slots = _slots(workers)
    while not slots.acquire(timeout=POLL_SECONDS):
        if cancel is not None and cancel.is_set():
            raise ConversionCancelled("the caller went away before its file was converted")
    try:
        yield
    finally:
        slots.release()


def _in_child(
    path: Path, converter: Converter, limits: ConversionLimits, cancel: threading.Event | None
) -> ConvertedDocument:
    reader, writer = os.pipe()
    flush_streams()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(reader)
        os.close(writer)
        raise UnreadableSource(
            str(path),
            UnreadableKind.OVER_LIMIT,
            f"its conversion process could not start ({error.strerror}): the machine is out "
            "of processes or memory; try again",
        ) from error
    if pid == 0:  # pragma: no cover - the child; its work is checked by the parent's tests
        _child(writer, reader, parent, path, converter, limits)
    os.close(writer)
    return _reply(pid, reader, path, limits, cancel)


def _child(
    writer: int,
    reader: int,
    parent: int,
    path: Path,
    converter: Converter,
    limits: ConversionLimits,
) -> None:  # pragma: no cover - runs in the forked child
    try:
        os.close(reader)
        os.setsid()  # a session of its own: tesseract is killed with it
        start_child(parent)
        close_inherited({0, 1, 2, writer})
        cpu = math.ceil(limits.seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        start = _address_space()
        resource.setrlimit(resource.RLIMIT_AS, (start + limits.memory_bytes,) * 2)
        reply: tuple[Any, ...]
        try:
            reply = ("document", converter(path, limits))
        except MemoryError:
            reply = ("memory",)
        except UnreadableSource as error:
            reply = ("unreadable", error.source, str(error.kind), error.reason)
        except DocumentError as error:
            reply = ("invalid", error.document_id, error.field, error.rule)
        except SourceError as error:
            reply = ("source", error.source, error.reason)
        except Exception as error:  # a converter's failure, named to the parent
            # A library that cannot allocate often says so its own way (lxml: a syntax
            # error; PDFium: an error code): a failure after the conversion grew to half
            # its allowance or more is taken for want of memory.
            grown = _peak_address_space() - start
            out_of_memory = (
                isinstance(error, OSError) and error.errno == errno.ENOMEM
            ) or grown >= limits.memory_bytes // 2
            reply = ("memory",) if out_of_memory else ("crashed", type(error).__name__)
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            data = pickle.dumps(("memory",))
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view) :]
    finally:
        os._exit(0)


def _address_space() -> int:
    """This process's virtual size in bytes (what ``RLIMIT_AS`` counts)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _peak_address_space() -> int:
    """The largest virtual size this process has had, in bytes (``VmPeak``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmPeak:"):
                return int(line.split()[1]) * 1024
    return 0


def _reply(
    pid: int, reader: int, path: Path, limits: ConversionLimits, cancel: threading.Event | None
) -> ConvertedDocument:
    """Read the child's reply, killing it when the time passes or the caller goes."""
    deadline = time.monotonic() + limits.seconds
    # A reply is the document pickled: a few bytes a character of a PDF or Word file
    # (they count their characters), a text file's own size for the others.
    most = max(8 * limits.max_characters, 2 * limits.max_bytes) + MIB
    received = bytearray()
    outcome: str | None = None
    try:
        while True:
            if cancel is not None and cancel.is_set():
                outcome = "cancelled"
                break
            left = deadline - time.monotonic()
            if left <= 0:
                outcome = "time"
                break
            ready, _, _ = select.select([reader], [], [], min(POLL_SECONDS, left))
            if not ready:
                continue
            piece = os.read(reader, MIB)
            if not piece:
                break
            received += piece
            if len(received) > most:
                outcome = "too-large"
                break
    finally:
        os.close(reader)
        if outcome is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            # The child itself too: just after the fork it may not lead its session yet.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # what it started and left running
    source = str(path)
    if outcome == "cancelled":
        raise ConversionCancelled(f"{source}: the caller went away while it converted")
    signalled = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    cpu = usage.ru_utime + usage.ru_stime
    if (
        outcome == "time"
        or signalled == signal.SIGXCPU
        or (signalled == signal.SIGKILL and outcome is None and cpu >= limits.seconds)
    ):
        raise over_limit(
            source,
            f"converting it took more than {limits.seconds:g} s",
            f"{limits.seconds:g} s",
            "seconds",
        )
    if outcome == "too-large":
        raise over_limit(
            source,
            f"its text is larger than {most // MIB:,} MiB",
            f"{limits.max_characters:,} characters",
            "max_characters",
        )
    if signalled == signal.SIGKILL:  # not by us, not for its CPU: the system's OOM killer
        raise UnreadableSource(
            source,
            UnreadableKind.OVER_LIMIT,
            "its conversion process was killed by the system (signal 9), most likely for "
            "want of memory: lower RAGWRIGHT_CONVERT_MAX_MEMORY or RAGWRIGHT_CONVERT_WORKERS",
        )
    reply = _loads(bytes(received)) if received and outcome is None else None
    if not isinstance(reply, tuple) or not reply:
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else "no reply"
        raise UnreadableSource(
            source, UnreadableKind.CORRUPT, f"its converter failed on it ({how}); export it again"
        )
    return _result(source, reply, limits)


def _result(source: str, reply: tuple[Any, ...], limits: ConversionLimits) -> ConvertedDocument:
    kind = reply[0]
    if kind == "document" and isinstance(reply[1], ConvertedDocument):
        return reply[1]
    if kind == "memory":
        size = f"{limits.memory_bytes / MIB:,.0f} MiB"
        raise over_limit(
            source, f"converting it needed more than {size} of memory", size, "memory_bytes"
        )
    fields = [str(field) for field in reply[1:4]]
    if kind == "unreadable" and len(fields) == 3 and fields[1] in set(UnreadableKind):
        raise UnreadableSource(fields[0], UnreadableKind(fields[1]), fields[2])
    if kind == "invalid" and len(fields) == 3:
        raise DocumentError(*fields)
    if kind == "source" and len(fields) == 2:
        raise SourceError(*fields)
    raise UnreadableSource(
        source,
        UnreadableKind.CORRUPT,
        f"its converter failed on it ({reply[1] if len(reply) > 1 else 'no reply'}); export "
        "it again",
    )


_ALLOWED = frozenset(
    {
        ("ragwright.adapters.formats.converted", "ConvertedDocument"),
        ("ragwright.adapters.formats.converted", "ConvertedSection"),
        ("datetime", "date"),
        ("datetime", "datetime"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
    }
)


class _DataOnly(pickle.Unpickler):
    """An unpickler that builds the converted document's classes and plain data only."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a conversion reply")


def _loads(data: bytes) -> Any:
    try:
        return _DataOnly(io.BytesIO(data)).load()
    except Exception:  # any broken reply is the converter's failure
        return None
