"""``olp connect``: point a coding tool (Continue, aider, Zed, Cline, codex, Claude Code) at
OLP.

:func:`render` gives a tool's configuration as the text of its config file (Cline: the steps to
follow in its settings panel) and notes for the person; :func:`write` puts it in the user's
home without destroying anything: JSON and TOML files are merged (a copy of the old file is
kept as ``<file>.bak``), a YAML file that already exists is left alone, and a file OLP cannot
parse is refused. Re-running changes nothing. :func:`run` is the command; it blocks on file I/O.
"""

from ._command import add_connect as add_connect
from ._command import run as run
from ._target import KEY_ENV as KEY_ENV
from ._target import PLACEHOLDER as PLACEHOLDER
from ._target import PROVIDER_NAME as PROVIDER_NAME
from ._target import ConnectError as ConnectError
from ._target import Rendered as Rendered
from ._target import Target as Target
from ._tools import TOOLS as TOOLS
from ._tools import ZED_MAX_TOKENS as ZED_MAX_TOKENS
from ._tools import UnknownTool as UnknownTool
from ._tools import render as render
from ._write import WriteResult as WriteResult
from ._write import write as write
