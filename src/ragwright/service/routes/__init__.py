"""The service's routes, one ``APIRouter`` per concern, each over the dependencies of
:mod:`ragwright.service.dependencies` (no closure over the app): ``create_app`` includes
:data:`ROUTERS` in this order (the OpenAPI document's order), then the page's router."""

from fastapi import APIRouter

from ragwright.service.routes import answers, files, health, ingestions, jobs, search, status

ROUTERS: tuple[APIRouter, ...] = (
    jobs.router,
    health.router,
    answers.router,
    search.router,
    status.router,
    ingestions.router,
    files.router,
)

__all__ = ["ROUTERS"]
