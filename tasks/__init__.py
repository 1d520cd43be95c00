"""Benchmark tasks: one module (or package) per benchmark family.

Every module here that defines a `Task` subclass decorated with `tasks.base.register`
is imported on first use, so adding a benchmark is adding one module.
"""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_") and _info.name != "base":
        importlib.import_module(f"{__name__}.{_info.name}")
