"""Reading a CLI's JSONL stdout: one JSON object a line, its ``type`` saying what it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from olp.ir import Event

from ._finish import TerminalOnce

__all__ = ["Envelope", "JsonLinesParser"]


class Envelope(msgspec.Struct):
    type: str = ""
    subtype: str | None = None


_ENVELOPE: Final = msgspec.json.Decoder(Envelope)


class JsonLinesParser(TerminalOnce):
    """A parser of JSONL stdout: :meth:`feed` hands each line and its envelope to
    :meth:`_read`, gives nothing once the job has ended (:meth:`_ended`), and nothing for a
    line that is not a JSON object or whose fields have unexpected types."""

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line; never raises (odd lines give nothing)."""
        if self._ended():
            return ()
        try:
            return self._read(_ENVELOPE.decode(line), line)
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()

    def _ended(self) -> bool:
        return self._terminal is not None

    def _read(self, envelope: Envelope, line: bytes) -> Sequence[Event]:
        """The events of one line (may raise :class:`msgspec.DecodeError`)."""
        raise NotImplementedError
