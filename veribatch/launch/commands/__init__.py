"""Extra `launch` commands.  Each module defines ``register(app, task_apps) -> None``;
`launch.cli` imports every module here and calls it (none need exist)."""
