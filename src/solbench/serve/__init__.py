"""``solbench serve``: a long-lived local evaluation service for agent and RL loops.

- :mod:`.service`: the state (per-device lanes, per-problem evaluators, SOL bounds, spare
  workers) and the scheduling; no HTTP.
- :mod:`.queue`: the fair queue (FIFO per client, round-robin across clients).
- :mod:`.app`: the HTTP layer (FastAPI on uvicorn; the ``serve`` extra).
- :mod:`.token`: the bearer token and the loopback check.
- :mod:`.client`: the client (stdlib only) ``solbench eval --server`` uses.

docs/serve.md documents the API.
"""
