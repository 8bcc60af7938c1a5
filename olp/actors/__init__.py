"""Provider actors: each owns its spawn limiter and the nursery its CLI processes run in."""


from ._actor import ActorStatistics as ActorStatistics
from ._actor import Admission as Admission
from ._actor import JobRunner as JobRunner
from ._actor import ProviderActor as ProviderActor
from ._actor import Ticket as Ticket
from ._adapter import CapabilityMissing as CapabilityMissing
from ._adapter import CliAdapter as CliAdapter
from ._adapter import Credentials as Credentials
from ._adapter import Invocation as Invocation
from ._adapter import LineParser as LineParser
from ._cli_runner import CliConfig as CliConfig
from ._cli_runner import CliRunner as CliRunner
from ._deadline import DeadlineClock as DeadlineClock
from ._deadline import Timeouts as Timeouts
from ._deadline import TimeoutWording as TimeoutWording
from ._lines import LineReader as LineReader
from ._lines import LineTooLong as LineTooLong
from ._login import Login as Login
from ._login import LoginPass as LoginPass
from ._process import CliProcess as CliProcess
from ._process import ProcessSpawner as ProcessSpawner
from ._process import Spawner as Spawner
from ._process import SpawnError as SpawnError
from ._process import SpawnSpec as SpawnSpec
from ._run_dir import CURRENT_RUN_DIR as CURRENT_RUN_DIR
from ._run_dir import RunDir as RunDir
from ._run_dir import reap_leftovers as reap_leftovers
from ._sandbox import BWRAP_HINT as BWRAP_HINT
from ._sandbox import Sandbox as Sandbox
from ._sandbox import find_bwrap as find_bwrap
from ._sandbox import install_roots as install_roots
from ._sessions import SessionKit as SessionKit
from ._sessions import SessionPolicy as SessionPolicy
from ._threads import ThreadServers as ThreadServers
from ._threads import ThreadServerStatistics as ThreadServerStatistics
from ._warm import PoolStatistics as PoolStatistics
from ._warm import WarmPool as WarmPool
from ._warm import WarmSettings as WarmSettings
from ._warm_units import WarmUnits as WarmUnits


