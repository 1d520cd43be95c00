"""``python -m veribatch`` = the `launch` / `veribatch` console scripts."""

from veribatch.launch.cli import main

main()
