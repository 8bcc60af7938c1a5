"""Where qwen's key comes from: the Coding Plan key from the proxy's environment (a
subscription, not metered), an OPENAI_API_KEY in the provider's env (metered), never the
proxy's own OPENAI_API_KEY; AUTH_MISSING otherwise, before spawning."""

from __future__ import annotations

from pathlib import Path

from olp.providers.qwen import ADAPTER, SPEC, _credentials
from olp.providers.qwen._credentials import CODING_PLAN_BASE_URL, preflight, spawn_env

HOME = Path("/nonexistent/home")
PLAN = "sk-sp-plan-0000"


def test_the_proxy_env_passes_only_the_coding_plan_key() -> None:
    proxy = {"OPENAI_API_KEY": "sk-openai", "OPENAI_BASE_URL": "https://api.openai.com/v1",
             "QWEN_OAUTH": "1", "QWEN_HOME": "/x", "QWEN_CODE_UNATTENDED_RETRY": "1"}
    assert spawn_env(proxy) == {}
    assert spawn_env({**proxy, "BAILIAN_CODING_PLAN_API_KEY": PLAN}) == {
        "BAILIAN_CODING_PLAN_API_KEY": PLAN, "OPENAI_API_KEY": PLAN,
        "OPENAI_BASE_URL": CODING_PLAN_BASE_URL}
    assert spawn_env({"BAILIAN_CODING_PLAN_API_KEY": "  "}) == {}


def test_no_files_are_linked() -> None:
    assert ADAPTER.home_links({}, HOME) == {}


def test_preflight() -> None:
    missing = preflight({}, HOME)
    assert missing is not None and missing.code == "AUTH_MISSING"
    assert "BAILIAN_CODING_PLAN_API_KEY" in missing.message
    assert preflight({"OPENAI_API_KEY": "k"}, HOME) is None
    assert preflight(spawn_env({"BAILIAN_CODING_PLAN_API_KEY": PLAN}), HOME) is None
    only_plan = preflight({"BAILIAN_CODING_PLAN_API_KEY": PLAN}, HOME)
    assert only_plan is not None and "not read by qwen" in only_plan.message
    assert preflight({"OPENAI_API_KEY": " "}, HOME) is not None


def test_metering() -> None:
    plan_env = {"BAILIAN_CODING_PLAN_API_KEY": PLAN}
    assert SPEC.metered_by({}, plan_env, real_home=HOME) is None  # a subscription
    assert SPEC.metered_by({}, {}, real_home=HOME) is None
    reason = SPEC.metered_by({"OPENAI_API_KEY": "sk-paid"}, {}, real_home=HOME)
    assert reason is not None and "OPENAI_API_KEY" in reason
    # a per-token key configured over the plan's wins, and is metered
    assert SPEC.metered_by({"OPENAI_API_KEY": "sk-paid"}, plan_env, real_home=HOME) is not None
    # the proxy's own OPENAI_API_KEY never reaches qwen
    assert SPEC.metered_by({}, {"OPENAI_API_KEY": "sk-openai"}, real_home=HOME) is None
    assert _credentials.metered_source({"OPENAI_API_KEY": PLAN, **plan_env}, HOME) is None
