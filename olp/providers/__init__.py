"""The providers: the kit (:mod:`olp.providers.kit`) and one subpackage per provider, each
exporting a ``SPEC`` that the kit discovers. Also what their CLI adapters share: the generic
adapter (``_adapter``), flattening a conversation into a prompt (``_prompt``), decoding images
(``_images``), reading JSONL and stream-json lines (``_jsonl``, ``_stream_json``) and the end
of a run (``_finish``, ``_exit``)."""
