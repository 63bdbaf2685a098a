"""The ``ragwright`` command: one module per group of commands, sharing ``common``."""

from ragwright.cli import corpus, evaluation, query, serve
from ragwright.cli.common import app, main

__all__ = ["app", "corpus", "evaluation", "main", "query", "serve"]
