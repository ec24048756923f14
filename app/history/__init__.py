"""The chat history: chats kept in SQLite or PostgreSQL behind Chainlit's data layer, login, export.

`service.start` wires it into Chainlit; the rest is the store and what it needs.
"""
