"""Turn settings and the machine into the exact `vllm serve` command, and run it."""
