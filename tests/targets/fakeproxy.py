"""A tiny HTTP forward proxy on 127.0.0.1, for the tests of proxies named by the environment.

A client that uses a proxy for an ``http://`` URL sends it the request with the absolute URI
(``POST http://model.test/v1/chat/completions HTTP/1.1``). This proxy logs the request line
and headers, and forwards the request, in origin form, to one upstream server (the fake API),
whatever host the URI names: so a target addressed as ``http://model.test/v1``, a host that
resolves nowhere, is answered through the proxy and only through it.

    with FakeAPI() as api, FakeProxy(api.host, api.port) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Proxied:
    """One request the proxy forwarded."""

    target: str  # the request target as sent: an absolute URI
    headers: dict[str, str]


@dataclass
class FakeProxy:
    """The proxy; use as a context manager."""

    upstream_host: str
    upstream_port: int
    host: str = "127.0.0.1"
    port: int = 0
    log: list[Proxied] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> FakeProxy:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="fakeproxy", daemon=True)
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

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    break
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                self.log.append(Proxied(target, headers))
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                parts = urlsplit(target)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                kept = [
                    line
                    for line in lines[1:]
                    if line and not line.lower().startswith(("proxy-", "connection:"))
                ]
                request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
                writer.write(await self._forward(request.encode("latin-1") + b"\r\n\r\n" + body))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(self, request: bytes) -> bytes:
        """Send one request upstream and return its whole response (the upstream closes)."""
        up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        try:
            up_writer.write(request)
            await up_writer.drain()
            head = await up_reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await up_reader.readexactly(length) if length else b""
            return head + body
        finally:
            up_writer.close()
