"""The chats page (/chats): the user's projects, pinned, filed and archived chats, and search inside messages."""
