"""The account page, a feature of its own (anyone logged in): their API keys and their memory ("About you")."""
