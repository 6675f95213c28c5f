"""Who may ask, and how much: an API key on every route but liveness, a request body limit, and the refusal
to serve an open network without a key.

* **API key** (``momentsearch serve --api-key KEY``, or ``MOMENTSEARCH_API_KEY``): every request but
  ``GET /livez`` carries it as ``Authorization: Bearer KEY``, ``X-API-Key: KEY``, or HTTP Basic with the key
  as the password (any user name), which is how a browser sends it: a 401 answers with
  ``WWW-Authenticate: Basic``, the browser asks once and then sends it with every request of the page,
  its thumbnails and its videos too. Keys are compared in constant time (``hmac.compare_digest``).
* **Body limit**: a request body over ``max_body_bytes`` (1 MiB by default) is a 413, whether or not it
  says its length, and nothing past the limit is read.
* **Binding**: an address other than loopback without a key is refused unless the caller says so.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import os
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.service.settings import MAX_BODY_BYTES

API_KEY_ENV = "MOMENTSEARCH_API_KEY"
OPEN_PATHS = frozenset({"/livez"})

Scope = dict[str, Any]


def api_key_from(value: str | None) -> str | None:
    """The key given, else the environment's; an empty or blank key is refused (it would let anyone in)."""
    key = value if value is not None else os.environ.get(API_KEY_ENV)
    if key is None:
        return None
    if not key.strip() or len(key) < 8:
        raise ConfigError(f"the API key must be at least 8 characters (from --api-key or {API_KEY_ENV})")
    return key


def check_bind(host: str, api_key: str | None, allow_unauthenticated: bool) -> None:
    """Serving beyond this machine without a key is refused unless asked for in so many words."""
    if api_key is not None or allow_unauthenticated or is_loopback(host):
        return
    raise ConfigError(f"--host {host} serves every video to the network without an API key: set --api-key (or "
                      f"{API_KEY_ENV}), bind 127.0.0.1, or pass --allow-unauthenticated if that is what you want")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def _presented(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """Every key the request presents (bearer, X-API-Key, Basic password)."""
    out = []
    for name, value in headers:
        if name == b"x-api-key":
            out.append(value.strip())
        elif name == b"authorization":
            scheme, _, rest = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                out.append(rest.strip())
            elif scheme.lower() == b"basic":
                try:
                    out.append(base64.b64decode(rest.strip(), validate=True).partition(b":")[2])
                except ValueError:
                    continue
    return out


async def json_reply(send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()) -> None:
    """A whole JSON response from ASGI middleware (before the app, or instead of it)."""
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


async def _reply(send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    await json_reply(send, status, {"error": message}, headers)


class Guard:
    """ASGI middleware: the API key (when one is set) and the body limit, before the app sees a request."""

    def __init__(self, app: Any, api_key: str | None, max_body_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_body = app, max_body_bytes
        self.key = api_key.encode() if api_key is not None else None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.key is not None and scope["path"] not in OPEN_PATHS and scope["method"] != "OPTIONS":
            given = _presented(scope.get("headers", []))
            ok = False
            for k in given:  # every presented key compared, in constant time each
                ok |= hmac.compare_digest(k, self.key)
            if not ok:
                why = "a wrong API key" if given else "no API key"
                return await _reply(send, 401, f"{why}: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                                    [(b"www-authenticate", b'Basic realm="momentsearch", charset="UTF-8"')])
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return await _reply(send, 413, f"the request body is over {self.max_body:,} bytes")
        body, more = b"", scope["method"] not in ("GET", "HEAD")
        while more:  # read the whole body first (searches are small), stopping at the limit
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body:
                return await _reply(send, 413, f"the request body is over {self.max_body:,} bytes")
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
