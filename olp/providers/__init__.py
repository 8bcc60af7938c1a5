"""The providers: the kit (:mod:`olp.providers.kit`) and one subpackage per provider, each
exporting a ``SPEC`` that the kit discovers. Also what their adapters share: flattening a
conversation into a prompt, decoding images, describing a CLI's exit."""
