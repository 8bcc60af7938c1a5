"""Where qwen's API key comes from, what its environment needs, and the pre-spawn check.

qwen-code 0.24.4 refuses its own Qwen-account login ("Qwen OAuth free tier was discontinued
on 2026-04-15", exit 1, no request), so OLP drives it only through its OpenAI-compatible auth
(``security.auth.selectedType: "openai"`` in the spawn's settings): ``OPENAI_API_KEY`` is the
key and ``OPENAI_BASE_URL`` the endpoint (it posts to ``$OPENAI_BASE_URL/chat/completions``).
No login file is read or linked (:func:`home_links` is empty; ``~/.qwen/oauth_creds.json``
is never used).

Where the key comes from:

* **Alibaba's Coding Plan**, ``BAILIAN_CODING_PLAN_API_KEY`` in the proxy's environment (the
  variable qwen's own Coding Plan preset reads; keys start ``sk-sp-``): passed on, and also
  given to qwen as ``OPENAI_API_KEY`` with ``OPENAI_BASE_URL`` set to the plan's international
  endpoint :data:`CODING_PLAN_BASE_URL` (qwen's preset also knows the China one,
  :data:`CODING_PLAN_CHINA_BASE_URL`: set ``OPENAI_BASE_URL`` to it in the provider's
  ``env``). The plan is a subscription ("Weekly quota included", qwen's preset): **not
  metered**.
* ``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL``) in the provider's configured ``env``: any
  OpenAI-compatible endpoint, e.g. DashScope's pay-per-token API. **Metered** (an API key
  billed per token), unless it is the Coding Plan key itself. ``OPENAI_API_KEY`` is never
  taken from the proxy's own environment: there it is most likely another vendor's key.

Metered or not (:func:`metered_source`, the kit's :class:`~olp.providers.kit.MeteredFiles`
hook; ``metered_env`` is empty because a Coding Plan key also reaches qwen as
``OPENAI_API_KEY``): metered when the ``OPENAI_API_KEY`` qwen gets is not the Coding Plan key.
An owner whose key comes with a plan says ``providers.qwen.metered: false``.

:func:`preflight` → ``AUTH_MISSING`` when qwen would get no ``OPENAI_API_KEY``; a Coding Plan
key set only in the provider's ``env`` is not enough (``spawn_env`` sees only the proxy's
environment, and qwen does not read that variable without its interactive set-up), and the
message says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from olp.failures import Code
from olp.ir import Error

KEY_VAR: Final = "OPENAI_API_KEY"
BASE_URL_VAR: Final = "OPENAI_BASE_URL"
CODING_PLAN_VAR: Final = "BAILIAN_CODING_PLAN_API_KEY"
#: qwen-code 0.24.4's Coding Plan endpoints (``alibaba-coding-plan`` preset).
CODING_PLAN_BASE_URL: Final = "https://coding-intl.dashscope.aliyuncs.com/v1"
CODING_PLAN_CHINA_BASE_URL: Final = "https://coding.dashscope.aliyuncs.com/v1"
MISSING_MESSAGE: Final = (
    "no key for qwen: set BAILIAN_CODING_PLAN_API_KEY (Alibaba Coding Plan) in the proxy's "
    "environment, or OPENAI_API_KEY and OPENAI_BASE_URL (an OpenAI-compatible endpoint) in "
    "providers.qwen.env (qwen-code's Qwen OAuth login is discontinued)"
)
PLAN_IN_ENV_MESSAGE: Final = (
    "BAILIAN_CODING_PLAN_API_KEY in providers.qwen.env is not read by qwen: set it in the "
    "proxy's environment instead, or set OPENAI_API_KEY to it (and OPENAI_BASE_URL to the "
    f"plan's endpoint, e.g. {CODING_PLAN_BASE_URL}) in providers.qwen.env"
)


def spawn_env(proxy_env: Mapping[str, str]) -> dict[str, str]:
    """From the proxy's environment, only the Coding Plan key (non-empty): as itself, as
    ``OPENAI_API_KEY`` and with its endpoint as ``OPENAI_BASE_URL``. Nothing else."""
    key = proxy_env.get(CODING_PLAN_VAR, "").strip()
    if not key:
        return {}
    return {CODING_PLAN_VAR: key, KEY_VAR: key, BASE_URL_VAR: CODING_PLAN_BASE_URL}


def home_links(env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
    """Nothing: qwen's key is in its environment, and its OAuth login is not used."""
    return {}


def metered_source(env: Mapping[str, str], real_home: Path) -> str | None:
    """``"OPENAI_API_KEY in providers.qwen.env"`` when qwen gets an ``OPENAI_API_KEY`` that is
    not the Coding Plan key (``env`` is what it gets), else ``None``. Reads nothing."""
    key = env.get(KEY_VAR, "").strip()
    if not key or key == env.get(CODING_PLAN_VAR, "").strip():
        return None
    return f"{KEY_VAR} in providers.qwen.env (a per-token API key)"


def preflight(env: Mapping[str, str], home: Path) -> Error | None:
    """``None`` when qwen gets a non-empty ``OPENAI_API_KEY``, else ``AUTH_MISSING`` with the
    fix (see the module docstring)."""
    if env.get(KEY_VAR, "").strip():
        return None
    message = PLAN_IN_ENV_MESSAGE if env.get(CODING_PLAN_VAR, "").strip() else MISSING_MESSAGE
    return Error(code=Code.AUTH_MISSING, category="auth", message=message)
