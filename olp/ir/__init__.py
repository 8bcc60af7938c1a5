"""The intermediate representation: requests and stream events, independent of wire formats.

``olp.ir`` imports nothing else of OLP's; everything else imports it.
"""

from ._events import CATEGORIES as CATEGORIES
from ._events import Category as Category
from ._events import Content as Content
from ._events import Error as Error
from ._events import Event as Event
from ._events import FinishReason as FinishReason
from ._events import QuotaReport as QuotaReport
from ._events import ReasoningDelta as ReasoningDelta
from ._events import Retrying as Retrying
from ._events import Start as Start
from ._events import Stop as Stop
from ._events import Terminal as Terminal
from ._events import TextDelta as TextDelta
from ._events import ToolCallDelta as ToolCallDelta
from ._events import Usage as Usage
from ._events import is_content as is_content
from ._events import is_terminal as is_terminal
from ._request import EFFORTS as EFFORTS
from ._request import ChatRequest as ChatRequest
from ._request import Effort as Effort
from ._request import ImagePart as ImagePart
from ._request import Message as Message
from ._request import Part as Part
from ._request import Reasoning as Reasoning
from ._request import Role as Role
from ._request import TextPart as TextPart
from ._request import ToolCall as ToolCall
from ._request import ToolSpec as ToolSpec
from ._request import effort_for_budget as effort_for_budget
from ._source import EventSource as EventSource
