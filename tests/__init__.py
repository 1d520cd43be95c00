"""Test package root: makes tests/launch importable as `tests.launch`, not as a second `launch`
(which shadowed the real package and made in-process tests import whichever `launch` the
editable install points at, e.g. another worktree)."""
