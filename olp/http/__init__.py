"""The HTTP front end: Quart-Trio on Hypercorn's trio worker, OpenAI-compatible."""

from ._app import create_app as create_app
from ._chat import HeaderPolicy as HeaderPolicy
from ._errors import ApiError as ApiError
from ._services import KeyAuthenticator as KeyAuthenticator
from ._services import Principal as Principal
from ._services import Services as Services
from ._stopping import STOPPING as STOPPING
from ._stopping import Stopping as Stopping
from ._stopping import drain_aware as drain_aware
