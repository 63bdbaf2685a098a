"""The chat-model contract: requests, responses, stream updates, and one shared deadline.

The records themselves live with the other shared records in :mod:`ragwright.types`
(the ``ChatModel`` protocol in :mod:`ragwright.protocols` names them, and the shared
records import nothing above them); ``Deadline`` lives in ``ragwright.deadline``
(embedding and rerank calls use it too). This module is the chat package's one place to
import them from, with the protocol.

Records are frozen: no middleware can change a caller's messages or options, so every
attempt is rebuilt from the same known-safe request by construction. Usage a provider
does not report is ``None`` ("unknown"), never zero.
"""

from __future__ import annotations

from ragwright.deadline import Deadline
from ragwright.protocols import ChatModel
from ragwright.types import (
    ChatMessage,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    ChatUpdate,
    ModelProfile,
    Role,
    Usage,
)

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatOptions",
    "ChatRequest",
    "ChatResponse",
    "ChatUpdate",
    "Deadline",
    "ModelProfile",
    "Role",
    "Usage",
]
