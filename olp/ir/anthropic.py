"""The Anthropic Messages wire codec: ``/v1/messages`` bodies in, messages and their SSE event
sequence out (the HTTP route that serves it is not built yet)."""

from ._anthropic_request import decode_count_tokens_request as decode_count_tokens_request
from ._anthropic_request import decode_messages_request as decode_messages_request
from ._anthropic_response import STOP_REASONS as STOP_REASONS
from ._anthropic_response import MessageBuilder as MessageBuilder
from ._anthropic_response import MessageStreamEncoder as MessageStreamEncoder
from ._anthropic_response import error_body as error_body
from ._anthropic_response import error_type as error_type
from ._anthropic_response import message_id as message_id
from ._validation import InvalidRequest as InvalidRequest
