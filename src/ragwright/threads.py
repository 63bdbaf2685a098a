"""Worker threads whose caller, once cancelled, still waits for them to return.

``asyncio.to_thread`` stops awaiting a thread when its caller is cancelled, but the
thread runs on: Python cannot interrupt it. Whatever the caller holds is then let go
while the work still uses it — an admission permit comes back while a query embedding
still takes a core, an index is closed under a search still reading it.
:func:`run_in_thread` delivers the cancellation only once the thread has returned, so
the caller's ``finally`` blocks run after the work, not beside it. Standard library only.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
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
