"""Who may talk to the server. Loopback by default; any other bind address needs an API token (``--token`` or
$EDGEACCEL_SERVE_TOKEN), checked before any request reaches a model: HTTP ``Authorization: Bearer <token>``,
gRPC metadata ``authorization: Bearer <token>``. Without it a request gets 401 (gRPC UNAUTHENTICATED)."""

from __future__ import annotations

import hmac
import ipaddress
import os

from ..errors import ConfigError

TOKEN_ENV = "EDGEACCEL_SERVE_TOKEN"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def resolve_token(token: str | None) -> str | None:
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    return token or None


def check_bind(host: str, token: str | None) -> None:
    """Refuse, before binding, to serve beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"--host {host} would serve beyond this machine without authentication",
            hint=f"give --token SECRET (or set ${TOKEN_ENV}); clients then send 'Authorization: Bearer SECRET'. "
                 "Or bind to 127.0.0.1 (the default) and put a reverse proxy in front")
    if token is not None and len(token) < 16:
        raise ConfigError("the API token is too short to protect anything (fewer than 16 characters)",
                          hint="make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'")


def authorized(header: str | bytes | None, token: str | None) -> bool:
    """Whether an Authorization header value carries the token (always True when none is configured)."""
    if token is None:
        return True
    if header is None:
        return False
    if isinstance(header, str):  # gRPC metadata; HTTP gives the header's raw bytes, compared as bytes (a token
        header = header.encode()  # beyond ASCII arrives UTF-8 encoded, and decoding it as latin-1 never matched)
    scheme, _, given = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token.encode())
