"""What the loopback mock upstreams share (h11 on trio); each mock keeps only its vendor's
wire format and scenarios (``tests/support/README.md``, "mockhttp").

* ``_h11``: ``serve_http(handle, dispatch, ...)`` binds, reads each request with its body and
  calls ``dispatch(exchange, request, body)``; ``Exchange`` sends JSON and SSE responses;
  ``while_watching`` notices a client that goes away while the mock streams or stays silent.
* ``_record``: ``RequestLog``, the base of each mock's handle (recorded requests with secrets
  redacted, scenario switching, ``wait_for_requests``/``wait_for_outcome``).
* ``_responder``: ``Responder``, the base of each mock's answering side (the ``/_mock/``
  control API, ``control``; recording; settling a record: ``reply_json``, ``drop``,
  ``watched``), and ``serve_mock_of``, which makes a mock's ``serve_mock``.
* ``scenario`` (imported by name: ``from mockhttp.scenario import ...``): ``ScenarioBase``
  (``build``, ``as_json``, the shared checks), ``CliApiScenario`` (the options the mocks of
  the CLIs' APIs share, ``stream_text``), and the shared scenario names, deltas and usage.
* ``_headers``: ``checked_headers``, a scenario's extra response headers.
* ``weather`` (imported by name): the vendor-neutral parts of the weather models.
* ``_main``: ``run_mock``, the ``python -m <mock>`` entry point, and its shared ``OPTIONS``.
* ``_client`` and ``_process``, for the mocks' self-tests: ``MockClient`` (a raw h11 client)
  and ``header``; ``mock_process``, a mock run with ``python -m``.
"""

from ._client import MockClient, header
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
from ._main import OPTIONS, Option, run_mock
from ._process import mock_process
from ._record import RequestLog
from ._responder import Responder, control, serve_mock_of

__all__ = ["MAX_BODY", "OPTIONS", "ClientGone", "Dispatch", "Exchange", "MockClient",
           "Option", "RequestLog", "Responder", "control",
           "fmt_seconds", "header", "mock_process", "read_request", "run_mock",
           "serve_connection", "serve_http", "serve_mock_of", "while_watching"]
