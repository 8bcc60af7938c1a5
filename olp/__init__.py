"""OLP, the Open LLM Proxy: one OpenAI-compatible endpoint, many subscriptions behind it."""

__version__ = "0.1.0"
