"""Merges shard records of a run directory into per-research-question tables.

Reads only files (manifest + parquet); imports nothing from `launch`, `tasks`,
`inference` or `verifiers`.
"""
