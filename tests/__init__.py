"""The project's tests: run from the project root with `make test`, `make test-fast` or `make pytest`."""
