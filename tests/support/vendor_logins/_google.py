"""Google's side of a gemini-cli Google-account login (``oauth-personal``): the token endpoint
with REUSABLE refresh tokens, and just enough Code Assist for ``gemini -p`` to answer.

As Google does, a refresh answers a new access token and ``expires_in`` but no new refresh
token: the same refresh token keeps working (an unknown one is 400 ``invalid_grant``). Every
refresh attempt is recorded (:attr:`GoogleVendor.refreshes`). The bearer check is stricter than
Google (which honours any access token until it expires): only a login's newest, unexpired
access token is taken, so a test sees which token each call carried. Routes, as gemini 0.61.0
calls them (``tests/fixtures/cli-reference/gemini/login_refresh/README.md``):

* ``POST oauth2.googleapis.com/token`` (a form): :meth:`GoogleVendor.refresh` (routed
  by the interceptor, as the other vendors' token endpoints);
* ``POST oauth2.googleapis.com/tokeninfo`` and ``GET www.googleapis.com/oauth2/v2/userinfo``:
  the token's and the account's details;
* ``POST cloudcode-pa.googleapis.com/v1internal:<rpc>``: ``loadCodeAssist`` a current tier
  and project (so no ``onboardUser`` follows), ``streamGenerateContent`` (one SSE event) and
  ``generateContent`` the text :attr:`GoogleVendor.answer`, anything else ``{}``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from ._tokens import Family, jwt

TOKEN_HOST = "oauth2.googleapis.com"
USERINFO_HOST = "www.googleapis.com"
CODE_ASSIST_HOST = "cloudcode-pa.googleapis.com"
SCOPE = ("https://www.googleapis.com/auth/cloud-platform "
         "https://www.googleapis.com/auth/userinfo.email "
         "https://www.googleapis.com/auth/userinfo.profile openid")
PROJECT = "mock-project-0000"

#: A route's answer: status, JSON payload, and whether it is sent as one SSE event.
Answer = tuple[int, Any, bool]


@dataclasses.dataclass(slots=True)
class GoogleVendor:
    """Google for gemini-cli. ``lifetime_s``: how long an access token it issues lives."""

    lifetime_s: float = 3599.0
    answer: str = "Hello from the mock upstream."
    families: dict[str, Family] = dataclasses.field(default_factory=dict)
    refreshes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    api_refusals: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    # --- issuing ----------------------------------------------------------------------------

    def login(self, name: str = "default", *, expires_in: float | None = None) -> Family:
        """A new login (as after signing in with Google in ``gemini``) whose access token
        expires in ``expires_in`` (default :attr:`lifetime_s`) seconds."""
        family = Family(name, "", f"1//mock-refresh-{name}", 0.0)
        self.families[name] = family
        self._issue(family, self.lifetime_s if expires_in is None else expires_in)
        return family

    def login_file(self, family: Family) -> dict[str, Any]:
        """``~/.gemini/oauth_creds.json`` for ``family``, as gemini writes it."""
        return {"access_token": family.access, "scope": SCOPE, "token_type": "Bearer",
                "id_token": family.id_token, "expiry_date": int(family.expires_at * 1000),
                "refresh_token": family.refresh}

    def accounts_file(self, family: Family) -> dict[str, Any]:
        """``~/.gemini/google_accounts.json``: the cached account e-mail."""
        return {"active": _email(family), "old": []}

    def _issue(self, family: Family, expires_in: float) -> None:
        family.generation += 1
        if family.access:
            family.old_access.add(family.access)
        family.expires_at = time.time() + expires_in
        family.access = f"ya29.mock-{family.name}-{family.generation}"
        family.id_token = jwt({"iss": "https://accounts.google.com", "sub": family.name,
                               "email": _email(family), "iat": int(time.time()),
                               "exp": int(time.time()) + 3600})

    # --- the routes -------------------------------------------------------------------------

    def route(self, host: str, method: str, path: str, body: Any,
              headers: Mapping[str, str]) -> Answer | None:
        """The answer to one request on a Google host other than the token endpoint
        (:meth:`refresh`), or ``None`` when it is none of the routes (the interceptor's
        404)."""
        bearer = headers.get("authorization")
        if (host, method, path) == (TOKEN_HOST, "POST", "/tokeninfo"):
            return self._token_info(bearer)
        if (host, method, path) == (USERINFO_HOST, "GET", "/oauth2/v2/userinfo"):
            return self._user_info(bearer)
        if host == CODE_ASSIST_HOST and method == "POST" and path.startswith("/v1internal:"):
            return self._code_assist(path.partition(":")[2],
                                     body if isinstance(body, dict) else {}, bearer)
        return None

    def refresh(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> tuple[int, Any]:
        """Answer one refresh request (the parsed form); records it. The refresh token is
        kept: none is returned."""
        token = body.get("refresh_token")
        family = next((f for f in self.families.values() if f.refresh == token), None)
        record: dict[str, Any] = {"at": time.time(), "body": dict(body),
                                  "headers": dict(headers),
                                  "family": family.name if family else None,
                                  "outcome": "ok" if family else "unknown"}
        self.refreshes.append(record)
        if family is None:
            return 400, {"error": "invalid_grant",
                         "error_description": "Token has been expired or revoked."}
        self._issue(family, self.lifetime_s)
        return 200, {"access_token": family.access, "expires_in": int(self.lifetime_s),
                     "scope": SCOPE, "token_type": "Bearer", "id_token": family.id_token}

    def _token_info(self, bearer: str | None) -> Answer:
        family = self._holder(bearer)
        if family is None:
            return 400, {"error": "invalid_token", "error_description": "Invalid Value"}, False
        left = int(family.expires_at - time.time())
        return 200, {"sub": family.name, "scope": SCOPE, "exp": str(int(family.expires_at)),
                     "expires_in": left, "email": _email(family), "email_verified": "true",
                     "access_type": "offline"}, False

    def _user_info(self, bearer: str | None) -> Answer:
        family = self._holder(bearer)
        if family is None:
            return *self._unauthenticated(), False
        return 200, {"id": family.name, "email": _email(family), "verified_email": True,
                     "name": family.name}, False

    def _code_assist(self, rpc: str, body: Mapping[str, Any], bearer: str | None) -> Answer:
        refused = self.check_bearer(bearer)
        if refused is not None:
            return *refused, False
        if rpc == "loadCodeAssist":
            return 200, {"currentTier": {"id": "standard-tier", "name": "Code Assist (mock)",
                                         "userDefinedCloudaicompanionProject": True},
                         "cloudaicompanionProject": PROJECT}, False
        if rpc in ("streamGenerateContent", "generateContent"):
            return 200, self._generated(str(body.get("model", ""))), \
                rpc == "streamGenerateContent"
        return 200, {}, False

    def _generated(self, model: str) -> dict[str, Any]:
        return {"response": {
            "candidates": [{"content": {"role": "model", "parts": [{"text": self.answer}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 25, "candidatesTokenCount": 7,
                              "totalTokenCount": 32},
            "modelVersion": model}, "traceId": "mock"}

    # --- the API check ----------------------------------------------------------------------

    def check_bearer(self, authorization: str | None) -> tuple[int, Any] | None:
        """``None`` when ``authorization`` carries a login's newest, unexpired access token;
        else Google's 401 ``UNAUTHENTICATED`` (the refusal recorded in
        :attr:`api_refusals`)."""
        return None if self._holder(authorization) is not None else self._unauthenticated()

    def _holder(self, authorization: str | None) -> Family | None:
        """The login whose newest, unexpired access token ``authorization`` carries; a refusal
        is recorded with why."""
        token = (authorization or "").removeprefix("Bearer ").strip()
        for family in self.families.values():
            if token == family.access and family.expires_at > time.time():
                return family
        why = "expired" if any(token == f.access for f in self.families.values()) else \
            "superseded" if any(token in f.old_access for f in self.families.values()) \
            else "unknown"
        self.api_refusals.append({"at": time.time(), "why": why})
        return None

    @staticmethod
    def _unauthenticated() -> tuple[int, Any]:
        return 401, {"error": {"code": 401, "status": "UNAUTHENTICATED",
                               "message": "Request had invalid authentication credentials. "
                                          "Expected OAuth 2 access token, login cookie or "
                                          "other valid authentication credential."}}


def _email(family: Family) -> str:
    return f"{family.name}@example.test"
