"""The admin page: the team's users, usage, limits, defaults, shared links and health, for admins only."""
