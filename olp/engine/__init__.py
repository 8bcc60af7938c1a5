"""The fallback engine: routes a request along its chain of provider actors."""

from olp.store import slot_name as slot_name  # names of the accounts' actors (issue #30)
from olp.store import split_slot as split_slot

from ._budget import Ledger as Ledger
from ._budget import SoftLimits as SoftLimits
from ._capabilities import CAPABILITIES as CAPABILITIES
from ._detail import HopRecord as HopRecord
from ._detail import detail_header as detail_header
from ._engine import Answer as Answer
from ._engine import Completion as Completion
from ._engine import Engine as Engine
from ._health import HealthBook as HealthBook
from ._health import HealthPolicy as HealthPolicy
from ._health import Skip as Skip
from ._routes import Capabilities as Capabilities
from ._routes import Hop as Hop
from ._routes import Route as Route
from ._routes import Router as Router
from ._routes import UnknownModel as UnknownModel
from ._routes import UnusableChain as UnusableChain
from ._sources import CacheMode as CacheMode
from ._sources import RequestContext as RequestContext
from ._sources import Sources as Sources
from ._walk import DEFAULT_ON as DEFAULT_ON
from ._walk import ChainFailed as ChainFailed
from ._walk import request_hash as request_hash
