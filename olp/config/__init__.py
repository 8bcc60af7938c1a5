"""Configuration: environment, ``$OLP_HOME/config.json`` and ``models-registry.json``.

Loading blocks on disk I/O (start-up, or a worker thread on SIGHUP); the loaded values are
immutable and safe to share across tasks.
"""

from ._registry import DEFAULT_REGISTRY_PATH as DEFAULT_REGISTRY_PATH
from ._registry import Capabilities as Capabilities
from ._registry import ModelEntry as ModelEntry
from ._registry import ModelListing as ModelListing
from ._registry import Registry as Registry
from ._registry import RegistryError as RegistryError
from ._registry import load_registry as load_registry
from ._settings import BINARY_ENV as BINARY_ENV
from ._settings import BUILTIN_PROVIDERS as BUILTIN_PROVIDERS
from ._settings import DEFAULT_BIND as DEFAULT_BIND
from ._settings import DEFAULT_COMMANDS as DEFAULT_COMMANDS
from ._settings import DEFAULT_PORT as DEFAULT_PORT
from ._settings import DEFAULT_TIMEOUTS as DEFAULT_TIMEOUTS
from ._settings import HTTP_TIMEOUTS as HTTP_TIMEOUTS
from ._settings import AuthConfig as AuthConfig
from ._settings import CacheConfig as CacheConfig
from ._settings import ChainEntry as ChainEntry
from ._settings import Config as Config
from ._settings import ConfigError as ConfigError
from ._settings import LogLevel as LogLevel
from ._settings import ProviderConfig as ProviderConfig
from ._settings import ProviderKind as ProviderKind
from ._settings import ProvidersConfig as ProvidersConfig
from ._settings import ProviderSettings as ProviderSettings
from ._settings import ResilienceConfig as ResilienceConfig
from ._settings import RetryConfig as RetryConfig
from ._settings import RoutingConfig as RoutingConfig
from ._settings import ServerConfig as ServerConfig
from ._settings import Settings as Settings
from ._settings import SoftTriggers as SoftTriggers
from ._settings import StreamingConfig as StreamingConfig
from ._settings import Timeouts as Timeouts
from ._settings import TimeoutsConfig as TimeoutsConfig
from ._settings import load_config as load_config
from ._settings import load_settings as load_settings
from ._settings import resolve_binary as resolve_binary
