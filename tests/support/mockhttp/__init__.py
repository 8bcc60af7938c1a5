"""The scaffolding the loopback mock upstreams share (h11 on trio).

* ``_h11``: ``serve_http(handle, dispatch, ...)`` binds, reads each request with its body and
  calls ``dispatch(exchange, request, body)``; ``Exchange`` sends JSON and SSE responses;
  ``while_watching`` notices a client that goes away while the mock streams or stays silent.
* ``_record``: ``RequestLog``, the base of each mock's handle (recorded requests with secrets
  redacted, scenario switching, ``wait_for_requests``/``wait_for_outcome``), and ``control``,
  the ``/_mock/`` control API.
* ``_main``: ``run_mock``, the ``python -m <mock>`` entry point.
"""

from ._h11 import (
    MAX_BODY,
    ClientGone,
    Dispatch,
    Exchange,
    fmt_seconds,
    read_request,
    serve_connection,
    serve_http,
    while_watching,
)
from ._main import run_mock
from ._record import RequestLog, control

__all__ = ["MAX_BODY", "ClientGone", "Dispatch", "Exchange", "RequestLog", "control",
           "fmt_seconds", "read_request", "run_mock", "serve_connection", "serve_http",
           "while_watching"]
