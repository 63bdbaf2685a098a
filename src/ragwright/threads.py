"""Worker threads whose caller, once cancelled, still waits for them to return.

``asyncio.to_thread`` stops awaiting a thread when its caller is cancelled, but the
thread runs on: Python cannot interrupt it. Whatever the caller holds is then let go
while the work still uses it — an admission permit comes back while a query embedding
still takes a core, an index is closed under a search still reading it.
:func:`run_in_thread` delivers the cancellation only once the thread has returned, so
the caller's ``finally`` blocks run after the work, not beside it.

Calls to a shared server (Redis: the response cache, the capacity pools) run on I/O
threads of their own (:func:`off_loop`, :func:`on_io_thread`): a server that accepts
connections and never answers then holds a thread until the client's timeout, while the
event loop goes on serving every other request. Standard library only.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def run_in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` in the default executor, with the caller's context
    variables (the request deadline among them), as ``asyncio.to_thread`` runs it.

    A cancellation that arrives while the thread runs is held until the thread returns,
    then raised (the thread's result or exception is dropped). The wait is as long as
    the work: bound the work itself (its deadline), not the wait.

    Example:
        >>> asyncio.run(run_in_thread(sum, [1, 2, 3]))
        6
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    running = loop.run_in_executor(None, functools.partial(context.run, func, *args, **kwargs))
    cancelled = False
    while not running.done():
        try:
            # ``wait`` leaves ``running`` alone when this task is cancelled.
            await asyncio.wait({running})
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not running.cancelled():
            running.exception()  # read, so asyncio does not report it as never retrieved
        raise asyncio.CancelledError
    return running.result()


# Calls to a shared server (Redis) from async code: a thread pool of their own, so a
# hung server holds these threads, never the event loop nor the default executor's
# threads that searches and status reads use.
IO_THREADS = 8


@functools.cache
def _io_threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(IO_THREADS, thread_name_prefix="ragwright-io")


def blocks(owner: object) -> bool:
    """Whether ``owner`` (a cache store, a capacity pool) waits on a server in its calls:
    it says so with ``blocking = True`` (the Redis ones); in-process ones do not."""
    return getattr(owner, "blocking", False) is True


async def on_io_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` on an I/O thread, with the caller's context variables.

    A cancelled caller stops waiting at once; the call ends on its own (its client's
    timeout bounds it)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, func, *args, **kwargs)
    return await loop.run_in_executor(_io_threads(), call)


async def off_loop(
    owner: object,
    func: Callable[..., T],
    /,
    *args: object,
    undo: Callable[[T], object] | None = None,
) -> T:
    """``func(*args)``, a call on ``owner``: made here when ``owner`` does not block,
    else on an I/O thread (:func:`on_io_thread`). ``undo`` takes back what the call gave
    when its caller was cancelled before it returned (a lease acquired meanwhile); it
    runs on an I/O thread too."""
    if not blocks(owner):
        return func(*args)
    if undo is None:
        return await on_io_thread(func, *args)
    running = asyncio.ensure_future(on_io_thread(func, *args))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        running.add_done_callback(lambda done: _undo(done, undo))
        raise


def _undo(done: asyncio.Future[T], undo: Callable[[T], object]) -> None:
    if not done.cancelled() and done.exception() is None:
        _io_threads().submit(undo, done.result())


def in_background(owner: object, func: Callable[..., object], /, *args: object) -> None:
    """``func(*args)`` from a callback that cannot wait: at once when ``owner`` does not
    block, else started on an I/O thread and not waited for."""
    if blocks(owner):
        _io_threads().submit(func, *args)
    else:
        func(*args)
