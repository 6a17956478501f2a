"""The HTTP side of the API targets: pooled connections, and failures sorted into kinds."""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import importlib.util
import ipaddress
import json
import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import (
    SplitResult,
    quote,
    quote_plus,
    unquote,
    unquote_plus,
    urlsplit,
    urlunsplit,
)

import httpx
import msgspec

from faultline._util.text import well_formed
from faultline._version import __version__
from faultline.errors import UsageError
from faultline.responses.loader import MAX_TOKENS
from faultline.targets.base import (
    CallError,
    Completion,
    FailureKind,
    GenerationParams,
    parse_retry_after,
)
from faultline.targets.base import redact as redact_secrets

__all__ = [
    "HttpTarget",
    "api_completion",
    "api_key",
    "check_base_url",
    "environment_proxy",
    "public_url",
    "secret_forms",
    "secret_variants",
    "token_count",
]

_FATAL = {401: "auth", 403: "auth", 404: "not_found"}
_MAX_MESSAGE = 500
_encode = msgspec.json.Encoder().encode
_decode_fast = msgspec.json.Decoder().decode


def _decode(content: bytes) -> Any:
    r"""A JSON body.

    A string escape of a lone surrogate (``"\ud83d"``, a cut emoji) is valid JSON that msgspec
    refuses; the standard library reads it, and each such character becomes U+FFFD, as no
    UTF-8 file or SQLite text can store it.
    """
    try:
        return _decode_fast(content)
    except msgspec.DecodeError:
        return _well_formed(json.loads(content))  # raises ValueError if it is not JSON


def _well_formed(value: Any) -> Any:
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list):
        return [_well_formed(v) for v in value]
    if isinstance(value, dict):
        return {well_formed(k): _well_formed(v) for k, v in value.items()}
    return value


def api_key(env_name: str, *, required: bool, provider: str) -> str | None:
    """The API key from the environment variable ``env_name``.

    Raises:
        UsageError: ``required`` and the variable is unset or empty.
    """
    key = os.environ.get(env_name, "").strip()
    if not key and required:
        raise UsageError(
            f"the {provider} target needs an API key: set {env_name} (or name another "
            "variable with --api-key-env); keys are read from the environment only, so they "
            "stay out of shell history and process lists"
        )
    unsendable = _unsendable(key)
    if unsendable is not None:
        # Sent as it is, it fails every request (h11 or the ASCII encoding refuses it); the
        # key itself is never shown, only where the bad character is and what it is.
        raise UsageError(
            f"{env_name}: the API key holds {unsendable}, which cannot be sent in an HTTP "
            "header; expected the key as printable ASCII (a key pasted with curly quotes or "
            "a line break is the usual cause)"
        )
    return key or None


def _unsendable(value: str) -> str | None:
    """What makes ``value`` unsendable as a header value (``None`` when nothing does).

    Only the character's position and code point are named, never the value.
    """
    for i, char in enumerate(value, 1):
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return f"a control character (U+{ord(char):04X}) at character {i}"
        if ord(char) > 0x7E:
            return f"a non-ASCII character (U+{ord(char):04X}) at character {i}"
    return None


def check_base_url(url: str, source: str) -> None:
    """Refuse a base URL that no request could be sent to, before anything is sent.

    Args:
        url: The base URL as given.
        source: Where it came from (``--base-url`` or the environment variable's name).

    Raises:
        UsageError: ``url`` is not an http(s) URL with a host, a valid port and no space or
            control character. The message shows it without user info or query values.
    """
    shown = _shown_url(url)
    expected = "expected an http:// or https:// URL such as http://localhost:8000/v1"
    for i, char in enumerate(url, 1):
        if ord(char) <= 0x20 or ord(char) == 0x7F:
            what = "a space" if char == " " else f"a control character (U+{ord(char):04X})"
            raise UsageError(
                f"{source}: got {shown}, which holds {what} at character {i}; {expected}, "
                "with no spaces (write a space as %20)"
            )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range or not a number, a broken [IPv6] host
        raise UsageError(
            f"{source}: got {shown}, which is not a valid URL ({exc}); {expected}"
        ) from None
    if parts.scheme not in {"http", "https"}:
        raise UsageError(f"{source}: got {shown}, {expected}")
    if not parts.hostname:
        raise UsageError(
            f"{source}: got {shown}, which names no host (a missing '/' after the scheme, as "
            f"in http:/host, is the usual cause); {expected}"
        )
    if port == 0:
        raise UsageError(f"{source}: got {shown}, whose port is 0; {expected}, port 1 to 65535")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        said = redact_secrets(str(exc), _url_secrets(url))
        raise UsageError(
            f"{source}: got {shown}, which is not a valid URL ({said}); {expected}"
        ) from None


_PROXY_SCHEMES = {"http", "https", "socks5", "socks5h"}


def environment_proxy(target: SplitResult) -> str | None:
    """The proxy the environment names for requests to ``target``, as curl and httpx find it.

    ``http_proxy`` / ``HTTP_PROXY`` for an ``http://`` target, ``https_proxy`` /
    ``HTTPS_PROXY`` for ``https://`` (the lower-case name first), else ``all_proxy`` /
    ``ALL_PROXY``; none for a host that ``no_proxy`` / ``NO_PROXY`` names, nor for a
    loopback host (``localhost``, 127.0.0.0/8, ``::1``), which is never proxied. As in
    curl, a proxy given without a scheme is an HTTP proxy. ``HTTP_PROXY`` is ignored under
    CGI (``REQUEST_METHOD`` set), where a client's ``Proxy:`` header would set it.

    Raises:
        UsageError: The proxy is not a URL faultline can use; the message names the
            variable and hides the proxy's credentials.
    """
    host = target.hostname or ""
    if _loopback(host):
        return None
    names = [f"{target.scheme}_proxy"]
    if target.scheme != "http" or "REQUEST_METHOD" not in os.environ:
        names.append(f"{target.scheme.upper()}_PROXY")
    names += ["all_proxy", "ALL_PROXY"]
    found = next(((n, os.environ[n].strip()) for n in names if os.environ.get(n, "").strip()), None)
    if found is None:
        return None
    no_proxy = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    if _bypassed(host, target.port or (443 if target.scheme == "https" else 80), no_proxy):
        return None
    name, proxy = found
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    shown = _shown_url(proxy)
    expected = "expected a proxy URL such as http://proxy.example:3128"
    scheme, _, rest = proxy.partition("://")
    scheme = scheme.lower()
    if scheme not in _PROXY_SCHEMES:
        raise UsageError(f"{name}: got {shown}, a {scheme}:// proxy; {expected}")
    try:
        check_base_url(f"http://{rest}", name)  # a host, a valid port, no control character
    except UsageError:
        raise UsageError(f"{name}: got {shown}; {expected}") from None
    if scheme.startswith("socks") and importlib.util.find_spec("socksio") is None:
        raise UsageError(
            f"{name}: got {shown}, a SOCKS proxy, which needs the socksio package "
            "(pip install 'httpx[socks]'); or set an http:// proxy"
        )
    return proxy


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``no_proxy`` names the host, as curl reads it.

    Comma-separated entries: ``*`` (every host), a domain (itself and its subdomains, a
    leading dot or not), an IP address or a CIDR block, each optionally with ``:PORT``.
    """
    host = host.lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if entry.startswith("["):  # [::1]:8080
            entry, _, rest = entry[1:].partition("]")
            wanted = rest.removeprefix(":")
        elif entry.count(":") == 1:
            entry, _, wanted = entry.partition(":")
        else:
            wanted = ""
        if not entry or (wanted and wanted != str(port)):
            continue
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        entry = entry.lstrip(".")
        if host == entry or host.endswith("." + entry):
            return True
    return False


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _shown_url(url: str) -> str:
    """``url`` as an error message may show it: user info and query values hidden, quoted."""
    head, _, fragment = url.partition("#")
    head, qmark, query = head.partition("?")
    scheme, sep, rest = head.partition("://")
    if sep and "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    shown = scheme + sep + rest
    if qmark:
        pairs = (pair.partition("=") for pair in query.split("&"))
        shown += "?" + "&".join(name + ("=***" if eq else "") for name, eq, _ in pairs)
    if fragment:
        shown += "#…"
    return repr(shown)


def _url_secrets(url: str) -> tuple[str, ...]:
    """The user info and query values of ``url``, in every form (for messages about it)."""
    head = url.partition("#")[0]
    head, _, query = head.partition("?")
    rest = head.partition("://")[2]
    userinfo = rest.rpartition("@")[0] if "@" in rest else ""
    values = [value for _, _, value in (pair.partition("=") for pair in query.split("&"))]
    return secret_variants(secret_forms([*values, *userinfo.split(":"), userinfo]))


def public_url(url: str) -> str:
    """``url`` without user, password, query or fragment: what may be written down."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


class HttpTarget:
    """A target reached over HTTP: endpoint, key, pooled connections, failures sorted.

    A provider subclass sets the class attributes and writes :meth:`auth_headers` and
    ``complete``.

    Args:
        model: The model to ask for.
        params: How requests are sent (its ``timeout`` and ``headers`` are used here).
        base_url: The API's base URL (default: the ``base_url_env`` variable, else
            ``default_base_url``).
        api_key_env: The environment variable holding the key (default: ``key_env``).
        concurrency: The most requests in flight (sizes the connection pool).

    Raises:
        UsageError: The URL is not an http(s) URL with a host and a valid port, a required
            key is missing, or the key or a header value cannot be sent in a header.
    """

    provider: str
    default_base_url: str
    base_url_env: str
    key_env: str
    key_required_for_any_url = False
    """Whether every endpoint needs a key (otherwise only the public API does)."""

    def __init__(
        self,
        model: str,
        params: GenerationParams,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        concurrency: int = 8,
    ) -> None:
        if base_url:
            check_base_url(base_url, "--base-url")
        elif os.environ.get(self.base_url_env):
            base_url = os.environ[self.base_url_env]
            check_base_url(base_url, self.base_url_env)
        else:
            base_url = self.default_base_url
        required = self.key_required_for_any_url or base_url.rstrip("/") == self.default_base_url
        key = api_key(api_key_env or self.key_env, required=required, provider=self.provider)
        for name, value in params.headers:
            unsendable = _unsendable(value)
            if unsendable is not None:
                raise UsageError(
                    f"--header {name!r}: the value holds {unsendable}, which cannot be sent "
                    "in an HTTP header; expected printable ASCII"
                )
        auth_headers = self.auth_headers(key)
        provider = self.provider
        self.model = model
        self.spec = f"{provider}:{model}"
        self.base_url = base_url.rstrip("/")
        parts = self._parts = urlsplit(base_url)
        # A query (Azure's ?api-version=...) stays a query: paths are joined before it. Its
        # values may be credentials, so they are secrets too, in every form a server may echo.
        query_values = secret_forms(
            value for _, _, value in (pair.partition("=") for pair in parts.query.split("&"))
        )
        userinfo = secret_forms(v for v in (parts.password,) if v)
        self.proxy = environment_proxy(parts)
        proxy_parts = urlsplit(self.proxy) if self.proxy else None
        proxy_password = proxy_parts.password if proxy_parts else None
        proxy_basic = _basic_auth(proxy_parts.username, proxy_password) if proxy_parts else None
        self.params = params
        # Header names are matched ignoring case: `--header 'authorization: …'` replaces the
        # key's Authorization header, where a second one was sent beside it (the key first).
        # Precedence: --header, then credentials in --base-url (sent as HTTP Basic auth, as
        # curl does), then the key from the environment.
        given = dict(params.headers)
        named = {name.lower() for name in given}
        basic = _basic_auth(parts.username, parts.password)
        if basic:
            auth_headers = {k: v for k, v in auth_headers.items() if k.lower() != "authorization"}
        defaults = {"User-Agent": f"faultline/{__version__}", **auth_headers}
        if basic:
            defaults["Authorization"] = f"Basic {basic}"
        headers = {k: v for k, v in defaults.items() if k.lower() not in named}
        headers |= {k: v for k, v in given.items() if k.lower() != "content-type"}
        values = [v for _, v in params.headers if v]
        self.secrets = secret_variants(
            (
                *values,
                *(_credential(v) for v in values),
                *((key,) if key else ()),
                *query_values,
                *userinfo,
                *((basic,) if basic else ()),
                *secret_forms(v for v in (proxy_password,) if v),
                *((proxy_basic,) if proxy_basic else ()),
            )
        )
        # httpcore scans its whole pool on every request (an idle check and a poll() per
        # connection), so one pool of 64 connections costs about a millisecond a request.
        # Instead: one single-connection transport per request in flight, taken from a free
        # list, so there is nothing to scan; and requests go to the transport directly, since
        # a client's cookie, redirect and auth machinery is not needed here
        # (docs/design/0004-run-journal.md).
        tls = httpx.create_ssl_context()  # one context: loading the CA bundle takes ~40 ms
        self._headers = {**headers, "Content-Type": "application/json"}  # the body is JSON
        self._timeouts = httpx.Timeout(params.timeout).as_dict()
        self._transports = [
            httpx.AsyncHTTPTransport(
                verify=tls,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                proxy=self.proxy,
            )
            for _ in range(max(1, concurrency))
        ]
        self._free: asyncio.LifoQueue[httpx.AsyncHTTPTransport] = asyncio.LifoQueue()
        for transport in self._transports:
            self._free.put_nowait(transport)

    @functools.cached_property
    def private_digest(self) -> str | None:
        """A digest of what selects the endpoint beyond :meth:`describe`, or ``None``.

        The base URL whole (its user info and query: a gateway may pick the deployment by
        a query value) and the ``--header`` names and values (a routing or virtual-key
        header); ``None`` when the URL has neither and no header is given. The response
        cache keys on it and ``--resume`` compares it, so another deployment's answers are
        never reused or mixed in, while the values themselves are never written. The API
        key is not part of it: a rotated key reaches the same model. PBKDF2-SHA256 with many
        rounds, so a short password or query value cannot be found again by trying guesses.
        """
        p = self._parts
        if not (p.query or p.username or p.password or self.params.headers):
            return None
        headers = sorted([name.lower(), value] for name, value in self.params.headers)
        material = json.dumps({"base_url": self.base_url, "headers": headers}, sort_keys=True)
        digest = hashlib.pbkdf2_hmac(
            "sha256", material.encode("utf-8"), b"faultline target identity v1", 100_000
        )
        return digest.hex()

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The headers that carry the key (``key`` is ``None`` when there is none)."""
        raise NotImplementedError

    def url(self, path: str) -> str:
        """The URL of an API path: joined to the base URL's path, before its query."""
        p = self._parts
        return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + path, p.query, ""))

    def describe(self) -> dict[str, Any]:
        """The target as the report records it (no key, no header values).

        ``proxy: true`` says that the requests went through a proxy from the environment.
        """
        described: dict[str, Any] = {
            "spec": self.spec,
            "provider": self.provider,
            "model": self.model,
            "base_url": public_url(self.base_url),
        }
        if self.proxy:
            described["proxy"] = True  # that one was used; never its address or credentials
        return described

    async def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` and return the decoded JSON object.

        Raises:
            CallError: The network failed, the server answered an error status, or the
                body is not a JSON object.
        """
        transport = await self._free.get()
        request = httpx.Request(
            "POST",
            self.url(path),
            headers=self._headers,
            content=_encode(body),
            extensions={"timeout": self._timeouts},
        )
        try:
            # httpx's timeout bounds each step (connect, each read); this bounds the request.
            async with asyncio.timeout(self.params.timeout):
                response = await transport.handle_async_request(request)
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise self._failure(
                "timeout", f"no answer within {self.params.timeout:g} s", exc
            ) from exc
        except httpx.TransportError as exc:
            raise self._failure("connection", f"connection failed: {_said(exc)}", exc) from exc
        except httpx.DecodingError as exc:
            # A body its Content-Encoding cannot decode (not gzip though it says gzip): a
            # body that is not the JSON the API promises, as one cut short is; worth a retry.
            raise self._failure(
                "malformed",
                f"the body could not be decoded as its Content-Encoding says: {_said(exc)}",
                exc,
            ) from exc
        finally:
            self._free.put_nowait(transport)
        if response.status_code >= 300:  # redirects are not followed: see _status_failure
            raise self._status_failure(response)
        try:
            data = _decode(response.content)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise self._failure(
                "malformed", f"the body is not JSON: {_excerpt(self.redact(response.text))}", exc
            ) from exc
        if not isinstance(data, dict):
            raise CallError("malformed", f"expected a JSON object, got {type(data).__name__}")
        return data

    def _failure(self, kind: FailureKind, message: str, _exc: Exception) -> CallError:
        return CallError(kind, self.redact(message))

    def _status_failure(self, response: httpx.Response) -> CallError:
        status = response.status_code
        if status < 400:
            # A redirect is not followed, so that the key is never sent to another host (and
            # its body is not the answer). The base URL is the one to fix: like a 404, every
            # request would be redirected the same way, so the run stops.
            location = response.headers.get("location")
            where = _excerpt(self.redact(location)) if location else "(no Location given)"
            return CallError(
                "bad_request",
                f"HTTP {status}: the server redirected to {where}; faultline does not follow "
                "redirects: set --base-url to the final address",
                status=status,
                fatal=True,
            )
        text = _excerpt(self.redact(_error_text(response)))
        message = f"HTTP {status}: {text}" if text else f"HTTP {status}"
        if status == 429:
            return CallError(
                "rate_limited",
                message,
                status=status,
                retry_after=parse_retry_after(response.headers),
            )
        if status >= 500 or status == 408:
            return CallError(
                "server_error",
                message,
                status=status,
                retry_after=parse_retry_after(response.headers),
            )
        if status in _FATAL:
            kind: FailureKind = "auth" if _FATAL[status] == "auth" else "not_found"
            return CallError(kind, message, status=status, fatal=True)
        return CallError("bad_request", message, status=status)

    def embedded_failure(self, error: object) -> CallError:
        """The failure a success status carried in its body (``{"error": {...}}``).

        Some gateways answer HTTP 200 with the error of the API behind them. The server's
        message is kept (secrets removed, shortened, as for an error status), and the kind
        follows what the error says: a 5xx, 408 or an overloaded or internal error is a
        ``server_error`` and a 429 or a rate limit ``rate_limited`` (both retried), any other
        4xx or an invalid-request, authentication or not-found error a ``bad_request`` (not
        retried, and never fatal: a success status is not trusted to stop the run); an error
        that says neither is ``malformed`` (retried, as any body that is not an answer).
        """
        message, code, names = "", None, ""
        if isinstance(error, dict):
            said = error.get("message")
            message = said if isinstance(said, str) else ""
            for field in ("code", "status"):
                code = code or _status_code(error.get(field))
            names = " ".join(
                str(error[k]) for k in ("type", "code", "status") if isinstance(error.get(k), str)
            ).lower()
        elif isinstance(error, str):
            message = error
        text = _excerpt(self.redact(message))
        head = "the server answered HTTP 200 with an error" + (f" (code {code})" if code else "")
        full = f"{head}: {text}" if text else head
        kind: FailureKind = "malformed"
        if code == 429 or "rate_limit" in names:
            kind = "rate_limited"
        elif (code is not None and (code >= 500 or code == 408)) or any(
            word in names for word in _SERVER_ERRORS
        ):
            kind = "server_error"
        elif (code is not None and 400 <= code < 500) or any(
            word in names for word in _REQUEST_ERRORS
        ):
            kind = "bad_request"
        return CallError(kind, full)

    def redact(self, text: str) -> str:
        """``text`` without the target's secrets."""
        return redact_secrets(text, self.secrets)

    async def aclose(self) -> None:
        """Close the connection pools."""
        for transport in self._transports:
            await transport.aclose()


def secret_forms(raw_values: Iterable[str]) -> tuple[str, ...]:
    """Every form in which URL-encoded secrets may be written or echoed back.

    A value from a URL (a query value, a password) is sent as given, and a server may echo it
    as given, decoded (``+`` as a space or as itself, ``%2B`` as ``+``), or encoded again
    (``%2B`` or ``%2b``). All of them are secrets.

    Args:
        raw_values: The values as they appear in the URL, still encoded.
    """
    forms: set[str] = set()
    for raw in raw_values:
        for decoded in {unquote_plus(raw), unquote(raw)}:
            encoded = {raw, quote(decoded, safe=""), quote_plus(decoded, safe="")}
            forms |= {decoded, *encoded, *(_lower_escapes(e) for e in encoded)}
    return tuple(sorted(f for f in forms if f))


def secret_variants(secrets: Iterable[str]) -> tuple[str, ...]:
    r"""The secrets, and each as a JSON text may write it, so an echo of either is scrubbed.

    A server that puts a key into a JSON error body may escape its ``/`` as ``\/`` (PHP's
    ``json_encode``), its non-ASCII characters as ``\uXXXX``, and a quote or a backslash.
    """
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        for form in (
            secret,
            json.dumps(secret)[1:-1],
            json.dumps(secret, ensure_ascii=False)[1:-1],
        ):
            forms |= {form, form.replace("/", "\\/")}
    return tuple(sorted(forms))


def _credential(value: str) -> str:
    """The credential of an ``Authorization``-style value: ``TOKEN`` of ``Bearer TOKEN``.

    Servers echo the token alone ("Incorrect API key provided: TOKEN"), so it is a secret of
    its own. A value that is not a scheme and a token is returned whole.
    """
    parts = value.split()
    return parts[1] if len(parts) == 2 and parts[0].isalpha() else value


def _basic_auth(username: str | None, password: str | None) -> str | None:
    """The HTTP Basic credentials of a URL's ``user:password@``, or ``None`` without them."""
    if not username and not password:
        return None
    pair = f"{unquote(username or '')}:{unquote(password or '')}"
    return base64.b64encode(pair.encode("utf-8")).decode("ascii")


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def api_completion(
    data: dict[str, Any],
    text: str,
    reason: object,
    usage_keys: tuple[str, str],
    reasoning: str | None = None,
) -> Completion:
    """A :class:`Completion` from an API answer: its text, stop reason, model and usage.

    Args:
        data: The decoded answer.
        text: The answer's text, already extracted.
        reason: The stop reason as the API gave it (kept only when it is a string).
        usage_keys: The names of the input and output token counts in ``data["usage"]``.
        reasoning: The model's reasoning, when the API returned it apart from the text.
    """
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    model = data.get("model")
    return Completion(
        text=text,
        model=model if isinstance(model, str) else None,
        finish_reason=reason if isinstance(reason, str) else None,
        input_tokens=token_count(usage.get(usage_keys[0])),
        output_tokens=token_count(usage.get(usage_keys[1])),
        reasoning=reasoning,
    )


def token_count(value: object) -> int | None:
    """A token count from an API's usage object, or ``None`` when it is not a count.

    A count is a whole number from 0 to 2^63 - 1, as a responses file's ``usage`` must hold.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    return None


def _error_text(response: httpx.Response) -> str:
    """The error message of an API error body (``{"error": {"message"}}``), or the body.

    Whole: secrets are removed before the text is shortened, so none is cut in two.
    """
    try:
        data = response.json()
    except ValueError:
        return response.text
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.text


_SERVER_ERRORS = ("overloaded", "server_error", "api_error", "internal", "unavailable", "timeout")
_REQUEST_ERRORS = ("invalid_request", "authentication", "permission", "not_found", "too_large")


def _status_code(value: object) -> int | None:
    """An HTTP status (100 to 599) an error object names, as a number or a string of digits."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


_QUIET_FAILURES = {
    "ReadError": "the connection broke while the answer was read",
    "WriteError": "the connection broke while the request was sent",
    "RemoteProtocolError": "the server closed the connection mid-answer",
}


def _said(exc: Exception) -> str:
    """What a network failure says, or, when it says nothing, its type and what that means."""
    text = str(exc).strip()
    if text:
        return text
    name = type(exc).__name__
    meaning = _QUIET_FAILURES.get(name)
    return f"{name} ({meaning})" if meaning else name


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"
