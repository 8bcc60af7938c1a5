"""Logins that last (issue #41; ADR 0031): one keeper per login (a provider × account whose
credential is an OAuth login in a file) refreshes it ahead of everyone's margin, under the
CLI's own lock, into the login's real file; spawns get only its access token."""

from ._ended import EndedLogins as EndedLogins
from ._endpoint import EndpointUnreachable as EndpointUnreachable
from ._endpoint import Post as Post
from ._endpoint import post_json as post_json
from ._files import fingerprint as fingerprint
from ._files import read_json as read_json
from ._files import write_atomic as write_atomic
from ._keeper import LoginKeeper as LoginKeeper
from ._locks import LockBusy as LockBusy
from ._locks import cli_lock as cli_lock
