"""Compose a pipeline explicitly, outer → inner.

    pipeline = (
        ChatPipelineBuilder(provider)
        .use(lambda inner: Probe(inner, name="call", events=sink))
        .use(lambda inner: Retry(inner, events=sink))
        .use(lambda inner: Probe(inner, name="attempt", events=sink))
        .build()
    )

The first ``use`` is the outermost layer, as in Microsoft.Extensions.AI's
``ChatClientBuilder``; ``build`` wraps from the innermost outwards.
"""

from __future__ import annotations

from collections.abc import Callable

from ragwright.chat.contract import ChatModel

Middleware = Callable[[ChatModel], ChatModel]


class ChatPipelineBuilder:
    """Collects middleware factories in outer → inner order."""

    def __init__(self, provider: ChatModel) -> None:
        self._provider = provider
        self._layers: list[Middleware] = []

    def use(self, layer: Middleware) -> ChatPipelineBuilder:
        self._layers.append(layer)
        return self

    def build(self) -> ChatModel:
        model = self._provider
        for layer in reversed(self._layers):
            model = layer(model)
        return model
