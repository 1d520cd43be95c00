"""The `launch` CLI: run planning, sharding, executors, ledger, status and resume."""
