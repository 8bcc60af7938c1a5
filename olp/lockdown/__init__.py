"""The lockdown self-check (issue #26; ADR 0024): before a CLI serves, OLP runs the binary
that would answer once, exactly as requests are spawned, against a loopback mock of its
vendor's API, and refuses it (``LOCKDOWN_FAILED``) when it offered the model a built-in
tool, sent its own agent prompt, inlined a file from its home or called another host."""

from ._check import run_check as run_check
from ._gate import LockdownGate as LockdownGate
from ._gate import fingerprint as fingerprint
from ._store import Verdict as Verdict
from ._store import VerdictStore as VerdictStore
from ._store import check_key as check_key
from ._targets import TARGETS as TARGETS
from ._targets import Target as Target
from ._targets import runs_tested_version as runs_tested_version
from ._verdict import Finding as Finding
from ._verdict import judge as judge
from ._verify import verifier as verifier
