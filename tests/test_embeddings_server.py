"""The embedding model's server answering what is no embeddings: the keyword search goes on alone, said in the log."""

from __future__ import annotations

import logging

import pytest

from app.documents.embeddings import Embedder
from tests.support.fake_openai import fake_openai_server


@pytest.mark.parametrize(
    ("model", "path", "odd"),
    [
        ("", "/v1/models", b"<html>Welcome to nginx!</html>"),
        ("", "/v1/models", {"data": 3}),
        ("embedder", "/v1/embeddings", b"<html>Bad gateway</html>"),
        ("embedder", "/v1/embeddings", {"data": [{"index": 0, "embedding": "not numbers"}]}),
        ("embedder", "/v1/embeddings", [1, 2]),
    ],
)
async def test_an_answer_that_is_no_embeddings_leaves_the_passages_without_vectors(model, path, odd, caplog):
    with fake_openai_server() as (url, state):
        state.odd_answers = {path: odd}
        embedder = Embedder(url, model, "", 1.0)
        with caplog.at_level(logging.WARNING, logger="app.documents.embeddings"):
            assert await embedder.embed(["a passage"]) is None
        await embedder.aclose()
    assert "answered no embeddings" in caplog.text and "keyword search goes on alone" in caplog.text
