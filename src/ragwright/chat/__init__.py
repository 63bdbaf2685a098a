"""The chat-client pipeline: one middleware per module, composed outer → inner.

This package holds the contract (``contract.py``), the shared deadline, the call and
attempt probes, and bounded retry; the response cache, message guard, capacity gate,
failover, telemetry and the provider adapters are still to come (issue 4).
"""
