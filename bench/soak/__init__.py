"""Fault soak: many requests through ``olp start`` with faults at every stage; checks for leaks.

    python -m bench.soak [--requests N] [--concurrency C] [--seed S] [--write docs/benchmarks.md]

Starts the loopback mock upstream ``tests/support/mock_openai_upstream`` (a child process of
its own serving one mock per fault, :data:`~bench.soak.scenarios.MOCKS`) and ``olp start``
whose providers are those mocks (``openai-compatible``, one provider per mock) and the three
CLI providers running the fake CLIs of ``tests/support/fakes`` through a small dispatcher that
reads the scenario from the prompt (``soak-scenario=NAME``), so each prompt maps to one fault.
Deadlines are short (:data:`~bench.soak.scenarios.TIMEOUTS`) so hangs resolve in seconds. Then
C workers (httpx on Trio, one keep-alive connection each) send N requests drawn by a seeded
RNG: a kind (a chain and a fault, see :func:`~bench.soak.scenarios.kinds`), streaming or JSON,
and a client behaviour: read normally, read slowly, or disconnect at a random moment or after
a random number of events. Every answer is classified: *complete* (finish reason, and
``[DONE]`` when streamed), *error* (an error status with an OpenAI error body, an in-stream
error event, or a JSON answer with the partial text marked as the README says:
``finish_reason: "length"`` and ``X-OLP-Truncated: true``), *disconnected* (the client left
first) or *BAD* (anything else: a stream that ended without ``[DONE]`` and without an error
event, no answer within a minute, or a complete answer from a route that always fails).

Afterwards it checks: no process of the proxy's left (descendants in ``/proc``, and any process
carrying this run's marker in its environment, also after shutdown), no limiter slot held
(``GET /health``), no flight left and no cache entry from a failed answer (``GET /cache/stats``,
then every stored entry decoded and traced back to its prompt's fault), no BAD answer, and the
proxy's RSS growth between request N/2 (5,000 of 10,000) and the end within
``--max-rss-growth-pct``: steady-state growth, not warm-up. Until about request 5,000 of
this seed the proxy's memory still settles (SQLite's page cache filling with the growing
cache table, malloc's heaps reaching their working size, a one-time ~0.9 MiB buffer near
request 4,700), with or without the proxy's memory bounds; after it, growth is below 1.5 %
in every run measured (docs/adr/0013-memory-over-months.md). The soak's proxy keeps idle
keep-alive connections for 120 s (see :func:`~bench.soak.upstreams.proxy_config`). Exit
status 1 on any violation. Nothing leaves 127.0.0.1.

Modules: :mod:`.scenarios` (what is sent), :mod:`.client` (one request and its
classification), :mod:`.upstreams` (the mocks and the proxy's config), :mod:`.drive` (the
run), :mod:`.checks` (what must hold afterwards), :mod:`.report` (the Markdown section),
``__main__`` (the command line).
"""
