"""Who descends from whom: one shared, briefly cached snapshot of the process table.

The runner must find every descendant of a tool (to measure and to kill it),
including those that left its process group.  psutil's `children(recursive=True)`
rescans /proc on every call; with dozens of queries in flight that costs more CPU
than the tools, so all monitors of a worker share one scan per ~20 ms.
"""

from __future__ import annotations

import os
import threading
import time


class ProcessTable:
    """One shared pid → parent-pid snapshot of /proc, refreshed at most every `max_age_s`.

    Finding a tree's descendants means reading every process's parent; with 32
    queries in flight, each monitor doing that itself would cost more CPU than the
    tools.  One snapshot serves all monitors of this worker.
    """

    def __init__(self, max_age_s: float = 0.02) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._taken = 0.0
        self._children: dict[int, list[int]] = {}

    def _scan(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
            ppid = int(stat[stat.rindex(b")") + 2:].split(maxsplit=2)[1])
            children.setdefault(ppid, []).append(int(name))
        return children

    def descendants(self, pid: int, fresh: bool = False) -> list[int]:
        with self._lock:
            now = time.monotonic()
            if fresh or now - self._taken > self.max_age_s:
                self._children = self._scan()
                self._taken = now
            children = self._children
        out: list[int] = []
        todo = [pid]
        while todo:
            for c in children.get(todo.pop(), ()):
                out.append(c)
                todo.append(c)
        return out


PROCESS_TABLE = ProcessTable()
"""The one table every monitor of this process shares."""
