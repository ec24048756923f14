"""The chat core: a turn, its budget, its backend; it never imports Chainlit."""
