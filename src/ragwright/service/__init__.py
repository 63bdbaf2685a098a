"""The HTTP service (``ragwright serve``): FastAPI routes over the application layer."""

from ragwright.service.app import create_app

__all__ = ["create_app"]
