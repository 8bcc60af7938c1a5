"""The fallback engine: routes a request along its chain of provider actors."""

from ._engine import DEFAULT_ON as DEFAULT_ON
from ._engine import Answer as Answer
from ._engine import ChainFailed as ChainFailed
from ._engine import Engine as Engine
from ._engine import HopFailure as HopFailure
from ._routes import Hop as Hop
from ._routes import Route as Route
from ._routes import Router as Router
from ._routes import UnknownModel as UnknownModel
