"""Logins that can be refreshed, for the real CLIs (issue #41): a TLS interceptor reached
through the CLIs' proxy and CA variables, playing the vendors' token endpoints with single-use
refresh tokens (Google's: reusable, with enough Code Assist for gemini to answer), and the API
check that takes only the newest access token (``tests/support/README.md``,
"vendor_logins")."""

from ._ca import HOSTS as HOSTS
from ._ca import TestCa as TestCa
from ._ca import make_ca as make_ca
from ._google import GoogleVendor as GoogleVendor
from ._interceptor import Interceptor as Interceptor
from ._interceptor import serve_interceptor as serve_interceptor
from ._tokens import CLAUDE_SCOPES as CLAUDE_SCOPES
from ._tokens import Family as Family
from ._tokens import Vendor as Vendor
from ._tokens import jwt as jwt
