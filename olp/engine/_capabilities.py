"""What a hop's model can take, against what a request asks: the capabilities a hop lacks
(it is skipped, or served with them named as ignored), and the request as the hop runs it
(a reasoning level it does not take moved to the nearest it does).

What a lack does is the entry's ``unsupported`` (docs/adr/0026-reasoning.md): under
``"degrade"`` (the default) reasoning is a preference, so a hop without it serves, while
tools, images and a JSON ``response_format`` are requirements; ``"skip"`` makes every lack
a requirement, ``"ignore"`` none."""

from __future__ import annotations

from typing import Final

import msgspec

from olp.ir import EFFORTS, ChatRequest, ImagePart

from ._routes import Hop

#: The capabilities a request may need of a hop's model, in the order they are named.
CAPABILITIES: Final = ("tools", "images", "response_format", "reasoning")
#: What a hop may lack and still serve, by its entry's ``unsupported``.
DEGRADES: Final = {"degrade": frozenset({"reasoning"}), "skip": frozenset(),
                   "ignore": frozenset(CAPABILITIES)}


def missing_capabilities(hop: Hop, request: ChatRequest) -> list[str]:
    """What ``request`` asks that ``hop``'s model cannot take, in a fixed order: ``tools``,
    ``images``, ``response_format``, ``reasoning``."""
    caps = hop.capabilities
    missing = []
    if request.tools and not caps.tools:
        missing.append("tools")
    if not caps.images and any(isinstance(p, ImagePart) for m in request.messages
                               for p in m.content):
        missing.append("images")
    if request.response_format is not None and not caps.json_mode \
            and request.response_format.get("type") != "text":
        missing.append("response_format")
    if asks_reasoning(request) and not caps.reasoning:
        missing.append("reasoning")
    return missing


def refused_for(hop: Hop, request: ChatRequest) -> tuple[str, ...]:
    """What ``hop`` lacks that keeps it from serving ``request`` under its entry's
    ``unsupported`` (empty: it serves, without what it lacks)."""
    missing = missing_capabilities(hop, request)
    if not missing:
        return ()
    degrades = DEGRADES[hop.unsupported]
    return tuple(m for m in missing if m not in degrades)


def for_hop(request: ChatRequest, hop: Hop) -> ChatRequest:
    """``request`` as ``hop`` runs it: a reasoning level its model does not take becomes the
    nearest one it does (ADR 0026; on the scale ``none`` … ``high``, the higher of two
    equally near), and a hop whose model takes none gets no reasoning at all (it serves
    unless its entry says ``"unsupported": "skip"``, and names it)."""
    reasoning = request.reasoning
    if reasoning is None or reasoning.effort is None:
        return request
    levels = hop.capabilities.reasoning
    if reasoning.effort in levels:
        return request
    if not levels:
        return msgspec.structs.replace(request, reasoning=None)
    wanted = EFFORTS.index(reasoning.effort)
    nearest = min((lvl for lvl in levels if lvl in EFFORTS),
                  key=lambda lvl: (abs(EFFORTS.index(lvl) - wanted), -EFFORTS.index(lvl)))
    return msgspec.structs.replace(
        request, reasoning=msgspec.structs.replace(reasoning, effort=nearest))


def asks_reasoning(request: ChatRequest) -> bool:
    """Whether the request asks for reasoning a hop must honour: a level other than
    ``none``, or the model's thinking back (``none`` is what a model without reasoning
    does anyway)."""
    reasoning = request.reasoning
    return reasoning is not None and (reasoning.effort not in (None, "none") or reasoning.show)


def ignored_params(hop: Hop, request: ChatRequest) -> tuple[str, ...]:
    """Request parameters this hop cannot honour and answers without (named in
    ``X-OLP-Ignored-Params``), then what the request's dialect could not carry at all."""
    ignored = [] if hop.capabilities.sampling_params else list(request.sampling_params_set())
    if hop.unsupported == "ignore" and request.tools and not hop.capabilities.tools:
        ignored += ["tools", "tool_choice"] if request.tool_choice is not None else ["tools"]
    caps, reasoning = hop.capabilities, request.reasoning
    if not caps.reasoning and asks_reasoning(request):  # it serves: its entry lets it degrade
        ignored.append("reasoning")
    elif reasoning is not None and reasoning.show and not caps.reasoning_out:
        ignored.append("thinking")  # the level is honoured; no thinking comes back
    return (*ignored, *request.dropped)
