"""The proxy's own deadlines for one hop, shared by the CLI and HTTP runners."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The proxy's own deadlines for one hop (the CLIs' own are minutes long or absent).

    ``first_output_s`` counts to the first *content* event, ``idle_s`` is the longest silence
    after content, ``total_s`` bounds the whole job.
    """

    first_output_s: float = 60.0
    idle_s: float = 120.0
    total_s: float = 600.0
