"""kvmem's own HTTP GET for the Hub: timeouts, a deadline, a byte budget, verified ranges.

Rules (issue 20):

- every request has a connect and read timeout (``KVMEM_HUB_TIMEOUT``, default 10 s) and ends
  by its operation's deadline (``KVMEM_HUB_DEADLINE``, default 60 s; ``bounded.Deadline``);
- a body is read through a byte budget: one byte past it is refused, whatever Content-Length
  announced; ``Accept-Encoding: identity`` is asked, and a gzip/deflate body sent anyway is
  inflated only up to the same budget (a gzip bomb stops there);
- a range request reads at most the asked range: a 206 must carry a ``Content-Range`` starting
  where asked and ending inside the range; a 200 (a server that ignores ``Range``) is read only
  up to the range's end when the range starts at 0, and refused otherwise;
- redirects (the Hub sends LFS files to a CDN) are followed up to 5 times, the token dropped
  when the host changes; a 4xx/5xx is an ``HTTPStatusError`` with the status and the Hub's
  ``X-Error-Code``, for hub.py to say what it means.

Standard library only (http.client).
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import zlib
from urllib.parse import urljoin, urlsplit

from . import SourceError
from .bounded import Deadline, read_at_most

__all__ = ["HTTPStatusError", "Unreachable", "timeout_s", "deadline_s", "open_body", "get"]

DEFAULT_TIMEOUT_S = 10.0     # connect, and each read (huggingface_hub's HF_HUB_ETAG_TIMEOUT default)
DEFAULT_DEADLINE_S = 60.0    # one operation (a config, a file list, every shard header of a model)
_MAX_REDIRECTS = 5
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class HTTPStatusError(SourceError):
    """The server answered with a 4xx/5xx status."""

    def __init__(self, message: str, status: int, code: str | None, headers: dict):
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers


class Unreachable(SourceError):
    """No answer: the connection failed or timed out."""


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SourceError(f"{name} must be a number of seconds, got {raw[:100]!r}") from None
    if not 0 < value <= 3600:
        raise SourceError(f"{name} must be between 0 and 3600 seconds, got {raw[:100]!r}")
    return value


def timeout_s() -> float:
    """Connect and read timeout of one request, seconds (KVMEM_HUB_TIMEOUT)."""
    return _seconds("KVMEM_HUB_TIMEOUT", DEFAULT_TIMEOUT_S)


def deadline_s() -> float:
    """The most one Hub operation may take, seconds (KVMEM_HUB_DEADLINE)."""
    return _seconds("KVMEM_HUB_DEADLINE", DEFAULT_DEADLINE_S)


class Body:
    """A response body read through the budget and the deadline (``read1``/``read``, ``close``)."""

    def __init__(self, conn, sock, response, limit: int, deadline: Deadline, what: str, inflate: str | None,
                 raw_cap: int):
        self._sock = sock                         # the response reads it even after conn lets go (Connection: close)
        self._conn, self._response, self._limit, self._deadline, self._what = conn, response, limit, deadline, what
        self._raw, self._raw_cap = 0, raw_cap     # bytes off the wire, and the most read (one past a budget)
        self._out = 0
        self._inflater = zlib.decompressobj(47 if inflate == "gzip" else zlib.MAX_WBITS) if inflate else None
        self._pending = b""
        self.status, self.headers = response.status, {k.lower(): v for k, v in response.getheaders()}

    def _raw_read(self, n: int) -> bytes:
        if self._raw >= self._raw_cap:
            return b""
        self._sock.settimeout(min(timeout_s(), self._deadline.left()))
        try:
            chunk = self._response.read1(min(n, self._raw_cap - self._raw))
        except (TimeoutError, socket.timeout):
            self._deadline.left()                # past the deadline: say so, not "stopped sending"
            raise Unreachable(f"{self._what}: the server stopped sending (no byte for {timeout_s():g} s)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(f"{self._what}: the connection broke ({type(exc).__name__})") from None
        self._raw += len(chunk)
        return chunk

    def read1(self, n: int = 1 << 16) -> bytes:
        if self._inflater is None:
            chunk = self._raw_read(n)
            self._out += len(chunk)
            return chunk
        while not self._pending:
            raw = self._inflater.unconsumed_tail or self._raw_read(1 << 16)
            if not raw:
                return b""
            try:
                self._pending = self._inflater.decompress(raw, self._limit + 1 - self._out)
            except zlib.error:
                raise SourceError(f"{self._what}: the compressed body is corrupt") from None
            self._out += len(self._pending)
            if self._out > self._limit:
                raise SourceError(f"{self._what} inflates past {self._limit:,} bytes, the most kvmem reads of it")
        chunk, self._pending = self._pending[:n], self._pending[n:]
        return chunk

    read = read1

    def close(self) -> None:
        _close(self._conn, self._sock, self._response)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _proxy(parts) -> str | None:
    """The proxy for this URL from HTTP(S)_PROXY / NO_PROXY, as huggingface_hub's client honours
    them; never for the loopback host."""
    import urllib.request
    if parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _resolve(host: str, timeout: float, what: str) -> None:
    """Look the host name up within ``timeout`` (getaddrinfo has no timeout of its own: without a
    network it can wait for the resolver's retries); Unreachable when it fails or takes longer."""
    import ipaddress
    import threading
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    box: dict = {}

    def look():
        try:
            socket.getaddrinfo(host, None)
        except OSError as exc:
            box["error"] = exc

    worker = threading.Thread(target=look, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise Unreachable(f"{what}: cannot resolve {host[:100]} within {timeout:g} s (no network?)")
    if "error" in box:
        raise Unreachable(f"{what}: cannot resolve {host[:100]} ({str(box['error'])[:100]}; no network?)")


def _connect(url: str, deadline: Deadline, what: str):
    """(connection, the request target): to the host, or through a proxy (a CONNECT tunnel for https)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceError(f"{what}: {url[:100]!r} is not an http(s) URL")
    timeout = min(timeout_s(), deadline.left())
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = _proxy(parts)
    _resolve(urlsplit(proxy).hostname or "" if proxy else parts.hostname, timeout, what)
    if proxy:
        via = urlsplit(proxy)
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(via.hostname or "", via.port or 80, timeout=timeout,
                                               context=ssl.create_default_context())
            conn.set_tunnel(parts.hostname, parts.port or 443)
            return conn, target
        return http.client.HTTPConnection(via.hostname or "", via.port or 80, timeout=timeout), url
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout,
                                           context=ssl.create_default_context()), target
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout), target


def open_body(url: str, *, what: str, limit: int, deadline: Deadline, headers: dict | None = None,
              byte_range: tuple[int, int] | None = None) -> Body:
    """GET ``url``; the body to read through ``limit`` bytes (a 206 to ``byte_range``: its length)."""
    send = {"Accept-Encoding": "identity", "User-Agent": "kvmem", **(headers or {})}
    if byte_range is not None:
        send["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
    host = urlsplit(url).hostname
    for _ in range(_MAX_REDIRECTS + 1):
        conn, target = _connect(url, deadline, what)
        parts = urlsplit(url)
        try:
            conn.request("GET", target, headers=send)
            sock = conn.sock
            response = conn.getresponse()
        except (TimeoutError, socket.timeout):
            conn.close()
            deadline.left()
            raise Unreachable(f"{what}: no answer from {parts.hostname} within {timeout_s():g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise Unreachable(f"{what}: cannot connect to {parts.scheme}://{parts.netloc} "
                              f"({type(exc).__name__}: {str(exc)[:100]})") from None
        location = response.getheader("Location")
        if response.status in (301, 302, 303, 307, 308) and location:
            _close(conn, sock, response)
            url = urljoin(url, location)
            if urlsplit(url).hostname != host:
                send.pop("Authorization", None)
            continue
        return _checked(conn, sock, response, what, limit, deadline, byte_range)
    raise SourceError(f"{what}: more than {_MAX_REDIRECTS} redirects")


def _close(conn, sock, response) -> None:
    """Close the response, the connection and the socket itself (after a Connection: close answer the
    connection lets go of its socket, and an unread one would keep the server writing)."""
    response.close()
    conn.close()
    if sock is not None:
        sock.close()


def _checked(conn, sock, response, what: str, limit: int, deadline: Deadline, byte_range) -> Body:
    status = response.status
    if status >= 400:
        code = response.getheader("X-Error-Code")
        headers = {k.lower(): v for k, v in response.getheaders()}
        _close(conn, sock, response)
        raise HTTPStatusError(f"{what}: the server answered HTTP {status}" + (f" ({code[:60]})" if code else ""),
                              status, code, headers)
    if status not in (200, 206):
        _close(conn, sock, response)
        raise SourceError(f"{what}: unexpected HTTP {status}")
    encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate") or (encoding != "identity" and byte_range is not None):
        _close(conn, sock, response)
        raise SourceError(f"{what}: the server sent a {encoding[:40]!r}-encoded body kvmem does not read")
    if byte_range is not None:
        start, end = byte_range
        if status == 206:
            found = _CONTENT_RANGE.match((response.getheader("Content-Range") or "").strip())
            if not found or int(found[1]) != start or int(found[2]) > end or int(found[2]) < start:
                _close(conn, sock, response)
                raise SourceError(f"{what}: the server answered the range {start}-{end} with Content-Range "
                                  f"{(response.getheader('Content-Range') or 'missing')[:60]!r}")
        elif start:
            _close(conn, sock, response)
            raise SourceError(f"{what}: the server ignored the Range header (HTTP 200 for bytes {start}-{end})")
    elif encoding == "identity":
        length = response.getheader("Content-Length")
        if length and length.isdigit() and int(length) > limit:
            _close(conn, sock, response)
            raise SourceError(f"{what} is {int(length):,} bytes, over the {limit:,} kvmem reads of it")
    # a 206 is read to the range's end and no further; a 200 to a range from 0 up to ``limit`` (the
    # caller's most, a stream it stops reading); any other body one byte past the budget, to refuse it
    if byte_range is None:
        raw_cap = limit + 1
    elif status == 206:
        raw_cap = min(limit, byte_range[1] - byte_range[0] + 1)
    else:
        raw_cap = limit
    return Body(conn, sock, response, limit, deadline, what, None if encoding == "identity" else encoding, raw_cap)


def get(url: str, *, what: str, limit: int, deadline: Deadline, headers: dict | None = None,
        byte_range: tuple[int, int] | None = None) -> tuple[bytes, dict]:
    """(body, response headers with lower-case names) of a GET, read through the budget."""
    with open_body(url, what=what, limit=limit, deadline=deadline, headers=headers, byte_range=byte_range) as body:
        return read_at_most(body, limit, what, deadline), body.headers
