"""State in one embedded SQLite database under ``OLP_HOME``: keys and their policies, the
cache, saved engine state, the usage ledger, the audit trail, the CLIs' sessions and
Responses answers kept for ``previous_response_id``.

Sync APIs block on disk I/O (for the CLI); the async ones run in worker threads (for Trio).
"""

from ._bindings import DEFAULT_ACCOUNT as DEFAULT_ACCOUNT
from ._bindings import Binding as Binding
from ._bindings import bound_accounts as bound_accounts
from ._bindings import format_binding as format_binding
from ._bindings import parse_binding as parse_binding
from ._bindings import slot_name as slot_name
from ._bindings import split_slot as split_slot
from ._bindings import valid_account_name as valid_account_name
from ._db import MIGRATIONS as MIGRATIONS
from ._db import Database as Database
from ._db import StoreError as StoreError
from ._key_records import NO_LIMITS as NO_LIMITS
from ._key_records import TOKEN_PREFIX as TOKEN_PREFIX
from ._key_records import UNRESTRICTED as UNRESTRICTED
from ._key_records import ImportedKey as ImportedKey
from ._key_records import ImportResult as ImportResult
from ._key_records import KeyNameError as KeyNameError
from ._key_records import KeyPolicy as KeyPolicy
from ._key_records import KeyRecord as KeyRecord
from ._key_records import Limits as Limits
from ._key_records import Principal as Principal
from ._key_records import Tier as Tier
from ._key_records import generate_token as generate_token
from ._key_records import hash_token as hash_token
from ._keys import AsyncKeyStore as AsyncKeyStore
from ._keys import KeyService as KeyService
from ._keys import KeyStore as KeyStore
from ._keys import import_keys as import_keys
from ._responses import AsyncResponseStore as AsyncResponseStore
from ._responses import ResponseStore as ResponseStore
from ._sessions import AsyncSessionStore as AsyncSessionStore
from ._sessions import SessionStore as SessionStore
from ._sessions import StoredSession as StoredSession
from ._state import HEALTH_STATE as HEALTH_STATE
from ._state import LEDGER_STATE as LEDGER_STATE
from ._state import StateStore as StateStore
