"""Configuration: environment, ``$OLP_HOME/config.json`` and ``models-registry.json``.

Loading blocks on disk I/O (start-up, or a worker thread on SIGHUP); the loaded values are
immutable and safe to share across tasks. Provider facts (built-in names, default deadlines,
binaries) come from the provider kit, :mod:`olp.providers.kit`.
"""

from olp.actors import Timeouts as Timeouts

from ._env import DEFAULT_BIND as DEFAULT_BIND
from ._env import DEFAULT_PORT as DEFAULT_PORT
from ._env import LogFormat as LogFormat
from ._env import LogLevel as LogLevel
from ._env import protect_config as protect_config
from ._load import load_config as load_config
from ._registry import DEFAULT_REGISTRY_PATH as DEFAULT_REGISTRY_PATH
from ._registry import Capabilities as Capabilities
from ._registry import ModelEntry as ModelEntry
from ._registry import ModelListing as ModelListing
from ._registry import Registry as Registry
from ._registry import RegistryError as RegistryError
from ._registry import load_registry as load_registry
from ._schema import AccountConfig as AccountConfig
from ._schema import AuthConfig as AuthConfig
from ._schema import CacheConfig as CacheConfig
from ._schema import ChainEntry as ChainEntry
from ._schema import Config as Config
from ._schema import ConfigError as ConfigError
from ._schema import ProviderConfig as ProviderConfig
from ._schema import ProviderKind as ProviderKind
from ._schema import ProvidersConfig as ProvidersConfig
from ._schema import ResilienceConfig as ResilienceConfig
from ._schema import RetryConfig as RetryConfig
from ._schema import RoutingConfig as RoutingConfig
from ._schema import ServerConfig as ServerConfig
from ._schema import SoftTriggers as SoftTriggers
from ._schema import StreamingConfig as StreamingConfig
from ._schema import TimeoutsConfig as TimeoutsConfig
from ._settings import IMPLICIT_DEFAULT as IMPLICIT_DEFAULT
from ._settings import AccountSettings as AccountSettings
from ._settings import ProviderSettings as ProviderSettings
from ._settings import Settings as Settings
from ._settings import load_settings as load_settings
from ._settings import resolve_binary as resolve_binary
