"""The running proxy: the server and its signals, live reload, building the provider actors
from the config, routing the registry and chains to them, and the JSON-lines logs."""
