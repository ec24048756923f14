"""The tests' servers each get a port of their own, whenever they start to listen on it."""

from __future__ import annotations

from tests.support.servers import free_port


def test_a_port_is_handed_out_once_in_a_run():
    # A vLLM started late on purpose (the browser's readiness test) once found its app on the port it was given.
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
