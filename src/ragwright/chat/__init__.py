"""The chat-client pipeline: one middleware per module, composed outer → inner.

``contract.py`` (requests, responses, the shared deadline), ``probes.py``, ``cache.py``,
``retry.py``, ``guard.py``, ``capacity.py``, ``failover.py``, ``budget.py``,
``telemetry.py`` and ``builder.py``; provider adapters live in
``ragwright.adapters.chatmodels`` and the default composition in ``ragwright.runtime``.
"""
