"""A Qdrant REST double on 127.0.0.1 for exercising ``QdrantIndex``'s server path.

qdrant-client talks to a server over HTTP (httpx) when given a URL. This double speaks
the endpoints the adapter calls, records every request (method, path, query, headers,
JSON body), and answers by handing the parsed request models to qdrant-client's own
local engine (``:memory:``), so searches, filters and scrolls return real results.
Payload indexes are the exception: local mode has none (and warns that they do
nothing), so the double keeps the field schema the client asked for and reports it in
``GET /collections/{name}`` as a server would.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qs, urlsplit

from qdrant_client import QdrantClient, models

# A server of the client's own minor version passes qdrant-client's compatibility check.
SERVER_VERSION = ".".join(version("qdrant-client").split(".")[:2]) + ".0"
_UPDATED = {"operation_id": 0, "status": "completed"}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the double received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class QdrantRestDouble:
    """The REST endpoints ``QdrantIndex`` uses, over qdrant-client's local engine."""

    def __init__(self, *, record: bool = True) -> None:
        self.record = record
        self.requests: list[RecordedRequest] = []
        self._engine = QdrantClient(location=":memory:")
        self._payload_schema: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        route = r"/collections/(?P<name>[^/]+)"
        self._routes: list[tuple[str, re.Pattern[str], Callable[[str, Any], Any]]] = [
            ("GET", re.compile(r"/"), lambda _, __: {"title": "qdrant", "version": SERVER_VERSION}),
            ("GET", re.compile(route + "/exists"), self._exists),
            ("GET", re.compile(route), self._info),
            ("PUT", re.compile(route), self._create),
            ("PATCH", re.compile(route), self._update),
            ("DELETE", re.compile(route), self._drop),
            ("PUT", re.compile(route + "/index"), self._create_index),
            ("PUT", re.compile(route + "/points"), self._upsert),
            ("POST", re.compile(route + "/points"), self._retrieve),
            ("POST", re.compile(route + "/points/scroll"), self._scroll),
            ("POST", re.compile(route + "/points/count"), self._count),
            ("POST", re.compile(route + "/facet"), self._facet),
            ("POST", re.compile(route + "/points/query"), self._query),
            ("POST", re.compile(route + "/points/payload"), self._set_payload),
            ("POST", re.compile(route + "/points/payload/delete"), self._delete_payload),
            ("POST", re.compile(route + "/points/delete"), self._delete),
            ("PUT", re.compile(route + "/points/vectors"), self._update_vectors),
        ]

    @property
    def engine(self) -> QdrantClient:
        """The local engine behind the endpoints (hold :attr:`lock` while using it)."""
        return self._engine

    @property
    def lock(self) -> threading.Lock:
        """Serialises every request: the local engine is not safe across threads."""
        return self._lock

    def to(self, method: str, suffix: str) -> list[RecordedRequest]:
        """Recorded requests with this method whose path ends with ``suffix``."""
        return [r for r in self.requests if r.method == method and r.path.endswith(suffix)]

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        for verb, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if verb == method and match:
                try:
                    with self._lock:
                        result = handler(match.groupdict().get("name", ""), body)
                except Exception as error:  # a server answers a bad request with its reason
                    return 400, {"status": {"error": f"{type(error).__name__}: {error}"}}
                if path == "/":
                    return 200, result
                return 200, {"result": result, "status": "ok", "time": 0.0}
        return 404, {"status": {"error": f"the double does not serve {method} {path}"}}

    def _exists(self, name: str, _: Any) -> Any:
        return {"exists": self._engine.collection_exists(name)}

    def _info(self, name: str, _: Any) -> Any:
        info = self._engine.get_collection(name).model_dump(mode="json")
        info["payload_schema"] = self._payload_schema.get(name, {})
        return info

    def _create(self, name: str, body: Any) -> Any:
        request = models.CreateCollection.model_validate(body)
        return self._engine.create_collection(
            name,
            vectors_config=request.vectors,
            sparse_vectors_config=request.sparse_vectors,
            metadata=request.metadata,
        )

    def _drop(self, name: str, _: Any) -> Any:
        self._payload_schema.pop(name, None)
        return self._engine.delete_collection(name)

    def _update(self, name: str, body: Any) -> Any:
        request = models.UpdateCollection.model_validate(body)
        return self._engine.update_collection(name, metadata=request.metadata)

    def _create_index(self, name: str, body: Any) -> Any:
        request = models.CreateFieldIndex.model_validate(body)
        schema = self._payload_schema.setdefault(name, {})
        schema[request.field_name] = {"data_type": body["field_schema"], "points": 0}
        return _UPDATED

    def _upsert(self, name: str, body: Any) -> Any:
        request = models.PointsList.model_validate(body)
        self._engine.upsert(name, points=request.points)
        return _UPDATED

    def _retrieve(self, name: str, body: Any) -> Any:
        request = models.PointRequest.model_validate(body)
        records = self._engine.retrieve(
            name,
            ids=request.ids,
            with_payload=request.with_payload,
            with_vectors=request.with_vector or False,
        )
        return [r.model_dump(mode="json") for r in records]

    def _scroll(self, name: str, body: Any) -> Any:
        request = models.ScrollRequest.model_validate(body)
        records, offset = self._engine.scroll(
            name,
            scroll_filter=request.filter,
            limit=request.limit or 10,
            offset=request.offset,
            with_payload=request.with_payload,
            with_vectors=request.with_vector or False,
        )
        return {"points": [r.model_dump(mode="json") for r in records], "next_page_offset": offset}

    def _count(self, name: str, body: Any) -> Any:
        request = models.CountRequest.model_validate(body)
        return {"count": self._engine.count(name, request.filter, exact=bool(request.exact)).count}

    def _facet(self, name: str, body: Any) -> Any:
        request = models.FacetRequest.model_validate(body)
        if request.key not in self._payload_schema.get(name, {}):
            # A server facets only payload-indexed fields (local mode would scan).
            raise ValueError(f"Index required but not found for {request.key!r}")
        response = self._engine.facet(
            name,
            key=request.key,
            facet_filter=request.filter,
            limit=request.limit or 10,
            exact=bool(request.exact),
        )
        return response.model_dump(mode="json")

    def _query(self, name: str, body: Any) -> Any:
        request = models.QueryRequest.model_validate(body)
        response = self._engine.query_points(
            name,
            query=request.query,
            using=request.using,
            query_filter=request.filter,
            limit=request.limit or 10,
            with_payload=request.with_payload,
        )
        return response.model_dump(mode="json")

    def _set_payload(self, name: str, body: Any) -> Any:
        request = models.SetPayload.model_validate(body)
        self._engine.set_payload(name, payload=request.payload, points=request.points or [])
        return _UPDATED

    def _delete_payload(self, name: str, body: Any) -> Any:
        request = models.DeletePayload.model_validate(body)
        self._engine.delete_payload(name, keys=request.keys, points=request.points or [])
        return _UPDATED

    def _update_vectors(self, name: str, body: Any) -> Any:
        request = models.UpdateVectors.model_validate(body)
        self._engine.update_vectors(name, points=request.points)
        return _UPDATED

    def _delete(self, name: str, body: Any) -> Any:
        self._engine.delete(name, points_selector=models.PointIdsList.model_validate(body))
        return _UPDATED

    def close(self) -> None:
        self._engine.close()


@contextmanager
def serve_qdrant_double(*, record: bool = True) -> Iterator[tuple[str, QdrantRestDouble]]:
    """A running double and its base URL (``http://127.0.0.1:<port>``); ``record=False``
    keeps no request (long runs: every upsert body holds vectors)."""
    double = QdrantRestDouble(record=record)

    class Handler(BaseHTTPRequestHandler):
        # One write per response, sent at once: small writes wait on delayed ACKs.
        disable_nagle_algorithm = True
        wbufsize = -1

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if double.record:
                double.requests.append(
                    RecordedRequest(
                        self.command,
                        url.path,
                        {k: v[-1] for k, v in parse_qs(url.query).items()},
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
            status, payload = double.handle(self.command, url.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", double
    finally:
        # Each qdrant-client checks the server version from a thread of its own; let those
        # finish before the port closes, or their warning escapes in that thread.
        for thread in threading.enumerate():
            if thread.name.endswith("(_check_compatibility)"):
                thread.join(timeout=10)
        server.shutdown()
        server.server_close()
        double.close()
