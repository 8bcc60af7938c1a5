"""The ``openai-compatible`` provider: any OpenAI-style ``/chat/completions`` API over HTTP.

An :class:`OpenAICompatRunner` is a :class:`~olp.actors.JobRunner` for
:class:`~olp.actors.ProviderActor`; :class:`HttpConfig` says where the upstream is and how
long to wait for it, :class:`RetryPolicy` which failures are retried on the same hop.
"""

from __future__ import annotations

from ._chunks import ChunkReader as ChunkReader
from ._classify import UpstreamError as UpstreamError
from ._classify import classify as classify
from ._classify import classify_stream_error as classify_stream_error
from ._classify import parse_error_body as parse_error_body
from ._classify import retry_after as retry_after
from ._config import HTTP_TIMEOUTS as HTTP_TIMEOUTS
from ._config import HttpConfig as HttpConfig
from ._request import encode_chat_request as encode_chat_request
from ._retry import RetryPolicy as RetryPolicy
from ._retry import plan_retry as plan_retry
from ._runner import OpenAICompatRunner as OpenAICompatRunner
from ._runner import make_client as make_client
from ._spec import SPEC as SPEC
from ._sse import SSEDecoder as SSEDecoder
from ._sse import SSEEvent as SSEEvent
from ._sse import SSETooLarge as SSETooLarge

