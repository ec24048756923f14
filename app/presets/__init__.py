"""Presets: the built-in ones, a user's own in the history, and their fields in the settings panel."""
