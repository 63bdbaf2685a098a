"""The ``ragwright`` command: one module per group of commands, sharing ``common``."""

from ragwright.cli import corpus, evaluation, keys, model, query, serve, workers
from ragwright.cli.common import app, main

__all__ = ["app", "corpus", "evaluation", "keys", "main", "model", "query", "serve", "workers"]
