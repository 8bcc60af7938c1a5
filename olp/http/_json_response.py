"""The JSON answer every route but the dashboard's pages and the stream gives."""

from __future__ import annotations

import json
from typing import Any

from quart import Response

JSON = "application/json"


def json_response(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type=JSON)
