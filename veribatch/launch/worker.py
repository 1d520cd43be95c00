"""Entry point of one local shard process: ``python -m veribatch.launch.worker RUN_DIR STAGE SHARD``.

Each local shard runs in its own process (its own session, so it can be killed
with its whole process tree): a shard that crashes the interpreter, leaks memory
or hangs takes only itself down, exactly as an array element would on SLURM.
Exit status: 0 done, 1 shard failed (error.json written), 75 shard busy.
"""

from __future__ import annotations

import sys

from .shard_loop import ShardBusyError, run_shard


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m veribatch.launch.worker RUN_DIR STAGE SHARD", file=sys.stderr)
        return 2
    run_dir, stage, shard = args[0], args[1], int(args[2])
    try:
        run_shard(run_dir, stage, shard)
    except ShardBusyError as e:
        print(f"veribatch.launch.worker: {e}", file=sys.stderr)
        return 75
    except BaseException as e:  # noqa: BLE001  (recorded in error.json by run_shard)
        print(f"veribatch.launch.worker: shard {stage}/{shard} failed: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
