"""State in one embedded SQLite database under ``OLP_HOME``: keys and their policies, the
cache, saved engine state, the usage ledger and the audit trail.

Sync APIs block on disk I/O (for the CLI); the async ones run in worker threads (for Trio).
"""

from ._db import MIGRATIONS as MIGRATIONS
from ._db import Database as Database
from ._db import StoreError as StoreError
from ._keys import NO_LIMITS as NO_LIMITS
from ._keys import TOKEN_PREFIX as TOKEN_PREFIX
from ._keys import UNRESTRICTED as UNRESTRICTED
from ._keys import AsyncKeyStore as AsyncKeyStore
from ._keys import ImportedKey as ImportedKey
from ._keys import ImportResult as ImportResult
from ._keys import KeyNameError as KeyNameError
from ._keys import KeyPolicy as KeyPolicy
from ._keys import KeyRecord as KeyRecord
from ._keys import KeyService as KeyService
from ._keys import KeyStore as KeyStore
from ._keys import Limits as Limits
from ._keys import Principal as Principal
from ._keys import Tier as Tier
from ._keys import generate_token as generate_token
from ._keys import hash_token as hash_token
from ._keys import import_keys as import_keys
from ._state import HEALTH_STATE as HEALTH_STATE
from ._state import LEDGER_STATE as LEDGER_STATE
from ._state import StateStore as StateStore
