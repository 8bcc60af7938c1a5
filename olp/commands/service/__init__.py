"""``olp service install|uninstall|status [--print]``: run ``olp start`` as a per-user service.

Linux: a systemd *user* unit (:mod:`._systemd`); macOS: a launchd agent (:mod:`._launchd`).
The file carries ``OLP_HOME``, ``OLP_PORT``, ``OLP_BIND``, ``OLP_LOG_LEVEL`` and the current
``PATH`` (so the service finds the vendor CLIs and ``bwrap``) and never a secret: it is
world-readable. Every function here blocks (file writes, ``systemctl``/``launchctl`` runs of up
to 30 s each): a command, not the server.
"""

from ._command import NOT_INSTALLED as NOT_INSTALLED
from ._command import add_service as add_service
from ._command import olp_command as olp_command
from ._command import run as run
from ._command import service_env as service_env
from ._launchd import LABEL as LABEL
from ._launchd import plist_bytes as plist_bytes
from ._shared import LOG_FILE as LOG_FILE
from ._shared import OWNER_KEY_FILE as OWNER_KEY_FILE
from ._shared import STOP_MARGIN_S as STOP_MARGIN_S
from ._systemd import UNIT_NAME as UNIT_NAME
from ._systemd import unit_text as unit_text
