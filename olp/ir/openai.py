"""The OpenAI wire codec: chat request bodies in, completions and SSE chunks out."""

from ._openai_request import decode_chat_request as decode_chat_request
from ._openai_response import DONE as DONE
from ._openai_response import ChunkEncoder as ChunkEncoder
from ._openai_response import CompletionBuilder as CompletionBuilder
from ._openai_response import completion_id as completion_id
from ._openai_response import error_body as error_body
from ._validation import InvalidRequest as InvalidRequest
