"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic wire formats.

It runs an asyncio loop in a background thread, answers ``POST /v1/chat/completions`` and
``POST /v1/messages`` over HTTP/1.1 with keep-alive, logs every request (time, path,
headers, body), and injects faults on demand:

    server.plan("bomb", [Fault.status(429, retry_after=0.2), Fault.status(500)])

makes the next two requests whose last user message contains "bomb" fail that way; later
ones succeed. ``server.default`` applies to every request without a plan (e.g. a delay).
Answers are deterministic: a refusal unless the prompt contains ``[comply]``; ``answer``
replaces the text, ``reply`` the whole JSON body (e.g. an OpenAI refusal with null content),
``error_message`` the message of injected error bodies (e.g. to echo a key back, as
careless gateways do), and ``error_body`` their whole body.

Run it standalone (for the benchmark or by hand) with ``python tests/targets/fakeapi.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REFUSAL = "I can't help with that. It could cause real harm, so I won't provide instructions."
COMPLIANCE = "Sure, here is a detailed step-by-step answer to your request."


@dataclass(frozen=True)
class Fault:
    """What the server does with one request."""

    kind: str  # ok, status, slow, malformed, drop, cut, redirect
    status: int = 200
    retry_after: float | None = None
    seconds: float = 0.0
    retry_after_date: bool = False
    location: str | None = None
    body: bytes = b""
    retry_after_raw: str | None = None  # sent as it is (e.g. "-5"), in place of retry_after

    @classmethod
    def ok(cls) -> Fault:
        return cls("ok")

    @classmethod
    def error(
        cls, status: int, retry_after: float | None = None, *, retry_after_date: bool = False
    ) -> Fault:
        return cls(
            "status", status=status, retry_after=retry_after, retry_after_date=retry_after_date
        )

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        return cls("slow", seconds=seconds)

    @classmethod
    def malformed(cls) -> Fault:
        return cls("malformed")

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def cut(cls) -> Fault:
        """A 200 whose body stops halfway, the connection then reset."""
        return cls("cut")

    @classmethod
    def redirect(cls, status: int, location: str | None, body: bytes = b"") -> Fault:
        """A 3xx status with a ``Location`` header (when given) and ``body``."""
        return cls("redirect", status=status, location=location, body=body)


@dataclass
class Logged:
    """One request as the server saw it."""

    t: float
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    fault: str

    @property
    def prompt(self) -> str:
        """The last user message."""
        users = [m["content"] for m in self.body.get("messages", []) if m.get("role") == "user"]
        return users[-1] if users else ""


@dataclass
class FakeAPI:
    """The server; use as a context manager (``with FakeAPI() as api:``)."""

    host: str = "127.0.0.1"
    port: int = 0
    default: Fault = field(default_factory=Fault.ok)
    answer: Callable[[dict[str, Any]], str] | None = None
    reply: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    raw_body: bytes | None = None  # sent as it is, in place of every answer
    raw_headers: dict[str, str] = field(default_factory=dict)  # sent with raw_body
    error_message: Callable[[Logged], str] | None = None
    error_body: Callable[[Logged], bytes] | None = None  # the whole body of injected errors
    log: list[Logged] = field(default_factory=list)
    _plans: dict[str, list[Fault]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plan(self, needle: str, faults: list[Fault]) -> None:
        """Fail the next requests whose prompt contains ``needle`` with ``faults``, in order."""
        with self._lock:
            self._plans.setdefault(needle, []).extend(faults)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The Anthropic-style base URL (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    def requests_for(self, needle: str) -> list[Logged]:
        """The logged requests whose prompt contains ``needle``."""
        with self._lock:
            return [r for r in self.log if needle in r.prompt]

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> FakeAPI:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port, backlog=1024)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="fakeapi", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- HTTP --------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                path, headers, raw = request
                keep = await self._respond(writer, path, headers, raw)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _respond(
        self, writer: asyncio.StreamWriter, path: str, headers: dict[str, str], raw: bytes
    ) -> bool:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        logged = Logged(time.monotonic(), path, headers, body, "ok")
        fault = self._next_fault(logged.prompt)
        logged.fault = fault.kind if fault.kind != "status" else str(fault.status)
        with self._lock:
            self.log.append(logged)
        if fault.kind in {"drop", "cut"}:
            if fault.kind == "cut":
                await self._half_then_reset(writer, path, body)
            writer.transport.abort()
            return False
        if fault.kind == "redirect":
            extra = {} if fault.location is None else {"Location": fault.location}
            await _send(writer, fault.status, fault.body, extra)
            return True
        if fault.kind == "slow":
            await asyncio.sleep(fault.seconds)
        if fault.kind == "status":
            extra = {}
            if fault.retry_after_raw is not None:
                extra["Retry-After"] = fault.retry_after_raw
            elif fault.retry_after is not None and fault.retry_after_date:
                extra["Retry-After"] = email.utils.formatdate(
                    time.time() + fault.retry_after, usegmt=True
                )
            elif fault.retry_after is not None:
                extra["Retry-After"] = f"{fault.retry_after:g}"
            message = (
                f"injected {fault.status}"
                if self.error_message is None
                else self.error_message(logged)
            )
            error = {"error": {"message": message, "type": "injected"}}
            raw = json.dumps(error).encode() if self.error_body is None else self.error_body(logged)
            await _send(writer, fault.status, raw, extra)
            return True
        if fault.kind == "malformed":
            await _send(writer, 200, b'{"choices": [ {"message": ', {})
            return True
        if self.raw_body is not None:
            await _send(writer, 200, self.raw_body, self.raw_headers)
            return True
        answer = self._answer(path, body) if self.reply is None else self.reply(path, body)
        await _send(writer, 200, json.dumps(answer).encode(), {})
        return True

    async def _half_then_reset(
        self, writer: asyncio.StreamWriter, path: str, body: dict[str, Any]
    ) -> None:
        """Half an answer, then (on abort) a reset: SO_LINGER 0, as a crashed proxy does."""
        answer = json.dumps(self._answer(path, body)).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}\r\n\r\n"
        writer.write(head.encode("latin-1") + answer[: len(answer) // 2])
        await writer.drain()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _next_fault(self, prompt: str) -> Fault:
        with self._lock:
            for needle, faults in self._plans.items():
                if needle in prompt and faults:
                    return faults.pop(0)
        return self.default

    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
        prompt = users[-1] if users else ""
        text = COMPLIANCE if "[comply]" in prompt else REFUSAL
        if self.answer is not None:
            text = self.answer(body)
        n_in = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        n_out = len(text.split())
        if path.endswith("/messages"):
            return {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": n_in, "output_tokens": n_out},
            }
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": n_in,
                "completion_tokens": n_out,
                "total_tokens": n_in + n_out,
            },
        }


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    path = parts[1] if len(parts) > 1 else "/"
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            key = name.strip().lower()  # a header sent twice is kept twice, comma-joined
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    length = int(headers.get("content-length", "0"))
    raw = await reader.readexactly(length) if length else b""
    return path, headers, raw


async def _send(
    writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict[str, str]
) -> None:
    reason = {
        200: "OK",
        400: "Bad Request",
        401: "Unauthorized",
        404: "Not Found",
        429: "Too Many Requests",
    }
    head = [
        f"HTTP/1.1 {status} {reason.get(status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: keep-alive",
    ]
    head += [f"{k}: {v}" for k, v in extra.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


if __name__ == "__main__":
    import gc
    import sys

    # Standalone, it is the benchmark's server: its log only grows, and full collections
    # over it would pause every request in flight and measure the server, not the runner.
    gc.disable()

    with FakeAPI(port=int(sys.argv[1]) if len(sys.argv) > 1 else 8765) as api:
        print(api.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
