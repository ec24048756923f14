"""Developer tools: run from the project root, e.g. `python -m tools.bench_app` (see the Makefile)."""
