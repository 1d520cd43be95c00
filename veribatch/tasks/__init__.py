"""Benchmark tasks: one module (or package) per benchmark family.

Every module here that defines a `Task` subclass decorated with `tasks.base.register`
is imported on first use (`load_all`, called by `tasks.base.get_task`/`task_names`), so
adding a benchmark is adding one module.  Importing `tasks.base` alone imports no task:
`launch status` reads run directories without paying for every benchmark's imports.
"""

import importlib
import pkgutil

_loaded = False


def load_all() -> None:
    """Import every task module once, so that each registers its `Task`."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_") and info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
