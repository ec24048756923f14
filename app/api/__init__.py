"""The app's OpenAI-compatible API (/v1) for people's scripts, answered through a personal API key."""
