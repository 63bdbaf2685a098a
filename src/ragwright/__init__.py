"""ragwright: answers from a team's own documents, with evidence it can prove."""

__version__ = "0.1.0"
