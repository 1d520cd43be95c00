"""The run directory's format, in one place: paths and atomic writes (`paths`), the
manifest (`manifest`), the shard index (`shards`), the DONE marker (`done`) and when a
shard is complete (`completeness`).

The bottom layer: launch writes and reads a run directory through it, every tables module
reads one through it, and it imports nothing else of veribatch.  docs/run-directory.md
describes the files.
"""
