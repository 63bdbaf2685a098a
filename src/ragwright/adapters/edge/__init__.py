"""The embedded index (qdrant-edge in-process), one module per part:
:mod:`~.index` (``EdgeIndex``: open, lock, verify, close; the directory's layout),
:mod:`~.reads`, :mod:`~.writes` (write sessions, free space, seals), :mod:`~.engine`
(the shard's configuration, filters, payload indexes) and :mod:`~.files` (manifest,
atomic JSON, free-space arithmetic, the read-only copy)."""
