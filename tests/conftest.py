"""Suite-wide test settings.

Hypothesis runs under one profile everywhere: bounded examples, no wall-clock deadline and no
``too_slow`` health check. Both of those measure the machine, not the code: under the load of
the rest of the suite on a 2-core CI machine they fail correct tests at random.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "olp", deadline=None, max_examples=100, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("olp")
