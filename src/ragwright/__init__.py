"""ragwright: answers from a team's own documents, with evidence it can prove."""

# The one source of the version: pyproject.toml reads it from here.
__version__ = "0.1.0"
