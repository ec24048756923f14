"""Chat exports read into chats: ChatGPT's, Open WebUI's and this app's own (no Chainlit, no database here)."""
