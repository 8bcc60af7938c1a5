"""The OpenAI Responses wire codec: ``/v1/responses`` bodies in, ``response`` objects and their
SSE event sequence out."""

from ._responses_request import decode_responses_request as decode_responses_request
from ._responses_response import ResponseBuilder as ResponseBuilder
from ._responses_response import ResponseStreamEncoder as ResponseStreamEncoder
from ._responses_response import response_id as response_id
from ._validation import InvalidRequest as InvalidRequest
