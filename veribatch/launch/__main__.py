"""``python -m veribatch.launch`` = the `launch` console script (handy where PATH lacks the venv)."""

from .cli import main

main()
