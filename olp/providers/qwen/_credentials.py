"""Where qwen's API key comes from, what its environment needs, and the pre-spawn check.

OLP drives qwen only through its OpenAI-compatible auth: ``OPENAI_API_KEY`` is the key and
``OPENAI_BASE_URL`` the endpoint; no login file is read or linked. The key is Alibaba's Coding
Plan key (``BAILIAN_CODING_PLAN_API_KEY`` from the proxy's environment, with the plan's
endpoint: a subscription, not metered) or ``OPENAI_API_KEY`` in the provider's configured
``env`` (metered unless it is the plan's key; never taken from the proxy's own environment).
:func:`preflight` → ``AUTH_MISSING`` when qwen would get no key. The details and why:
``tests/fixtures/cli-reference/qwen/README.md``, "Login and credentials".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from olp.failures import Code, failure
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
    fix (see the fixture README)."""
    if env.get(KEY_VAR, "").strip():
        return None
    message = PLAN_IN_ENV_MESSAGE if env.get(CODING_PLAN_VAR, "").strip() else MISSING_MESSAGE
    return failure(Code.AUTH_MISSING, message)
