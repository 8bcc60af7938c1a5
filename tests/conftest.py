"""Suite-wide test settings.

Hypothesis runs under one profile everywhere: bounded examples, no wall-clock deadline and no
``too_slow`` health check. Both of those measure the machine, not the code: under the load of
the rest of the suite on a 2-core CI machine they fail correct tests at random.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "olp", deadline=None, max_examples=100, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("olp")


#: Each tier's marker follows from its directory, so ``-m integration`` or ``-m realcli`` selects
#: every test of that tier and no file can forget its mark.
TIERS: Final = ("unit", "integration", "realcli")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        parts = item.path.resolve().relative_to(tests_dir).parts
        if parts and parts[0] in TIERS:
            item.add_marker(parts[0])
