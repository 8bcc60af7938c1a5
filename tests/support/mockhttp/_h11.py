"""The mocks' HTTP/1.1 core now lives in ``olp.lockdown._loopback``; re-exported here."""

from olp.lockdown._loopback import (
    MAX_BODY,
    Bindable,
    ClientGone,
    Dispatch,
    Exchange,
    H,
    fmt_seconds,
    read_request,
    serve_connection,
    serve_http,
    while_watching,
)

__all__ = ["MAX_BODY", "Bindable", "ClientGone", "Dispatch", "Exchange", "H", "fmt_seconds",
           "read_request", "serve_connection", "serve_http", "while_watching"]
