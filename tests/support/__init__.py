"""What the tests share: real servers (vLLM, the app, PostgreSQL, nginx), a fake OpenAI server, a chat client."""
