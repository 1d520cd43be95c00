"""Benchmark tasks: one package per benchmark family (data, prompts, stages, tables, CLI).

Each is found through its entry point (group ``veribatch.tasks``, `tasks.base.task_class`),
so importing this package or `tasks.base` imports no task: `launch status` reads run
directories without paying for every benchmark's imports.
"""
