"""A raw HTTP client for the serve tests: POST a body, get (status, JSON) back, errors included."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def post_json(server, path: str, body: bytes, content_type: str = "application/octet-stream") -> tuple[int, dict]:
    request = urllib.request.Request(server.url + path, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
