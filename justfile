# OLP's tasks. Run them through ./dev, which sets up .venv first:  ./dev <recipe>
set shell := ["bash", "-euo", "pipefail", "-c"]

py := ".venv/bin/python"

# List the recipes
default:
    @{{just_executable()}} --list

# Start the proxy (OLP_PORT, OLP_BIND, OLP_HOME, OLP_OWNER_TOKEN, OLP_LOG_LEVEL apply)
start:
    .venv/bin/olp start

# The real CLIs install (network and disk) while lint and the unit tier (MockClock: nothing
# timed) run side by side; the integration and real-CLI tiers, which spawn processes under
# real deadlines, run alone, one after the other.
#
# Every test tier: lint, deterministic, integration, real CLIs
test:
    #!/usr/bin/env bash
    set -euo pipefail
    logs=$(mktemp -d)
    trap 'rm -rf "$logs"' EXIT
    scripts/install-real-clis >"$logs/install" 2>&1 & install=$!
    {{just_executable()}} lint >"$logs/lint" 2>&1 & lint=$!
    {{just_executable()}} unit >"$logs/unit" 2>&1 & unit=$!
    failed=""
    for step in lint:$lint unit:$unit install:$install; do
        if ! wait "${step#*:}"; then failed="$failed ${step%%:*}"; fi
        echo "--- ${step%%:*}"; cat "$logs/${step%%:*}"
    done
    if [ -n "$failed" ]; then echo "failed:$failed" >&2; exit 1; fi
    {{just_executable()}} integration
    {{just_executable()}} realcli

# ruff and mypy --strict
lint:
    .venv/bin/ruff check olp tests bench
    {{py}} -m mypy

# Parsers, codecs, store, and MockClock tests of actors, engine and app (no real I/O timing)
unit:
    {{py}} -m pytest -q --durations=5 tests/unit

# Real sockets and real subprocesses, with fake CLIs replaying recorded transcripts
integration:
    {{py}} -m pytest -q --durations=10 tests/integration

# The real vendor CLIs, installed pinned into a cache outside the repo, against loopback mocks
realcli:
    #!/usr/bin/env bash
    set -euo pipefail
    out=$(scripts/install-real-clis)
    eval "$(grep -E '^OLP_REAL_[A-Z]+=' <<<"$out" | sed 's/^/export /')"
    {{py}} -m pytest -q --durations=10 tests/realcli

# The benchmarks (spawn path, cache hits, pass-through and fallback, the hot path's floor, sandbox, tool bridge, warm CLIs); write docs/benchmarks.md
bench:
    {{py}} -m bench.spawn_overhead --write docs/benchmarks.md
    {{py}} -m bench.cache_hits --write docs/benchmarks.md
    {{py}} -m bench.passthrough --write docs/benchmarks.md
    {{py}} -m bench.hot_path --write docs/benchmarks.md
    {{py}} -m bench.sandbox_overhead --write docs/benchmarks.md
    {{py}} -m bench.bridge_startup --write docs/benchmarks.md
    {{py}} -m bench.warm_clis --write docs/benchmarks.md
    {{py}} -m bench.warm_handout --write docs/benchmarks.md
    {{py}} -m bench.conversation_cost --write docs/benchmarks.md

# Instructions per request under valgrind's callgrind, OLP next to its floors (needs valgrind); write docs/benchmarks.md
bench-instructions *args:
    {{py}} -m bench.instructions --write docs/benchmarks.md {{args}}

# Fault soak (--requests N, default 10,000; --concurrency C, default 16); exit 1 on a leak or a truncated answer
soak *args:
    {{py}} -m bench.soak --write docs/benchmarks.md {{args}}
