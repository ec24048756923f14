"""Passages ranked by meaning too, where the operator serves an embedding model (any OpenAI-compatible API)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import openai
from openai import AsyncOpenAI

# Texts per request: a long document's passages go in a few requests, none too big for the server.
BATCH = 64
# Reciprocal rank fusion's constant: a passage ranked r-th by a method adds 1 / (K + r) (the usual 60).
FUSION_K = 60
logger = logging.getLogger(__name__)


class Embedder:
    """An embedding model's `/v1/embeddings`; failures are logged and leave the keyword search alone."""

    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float) -> None:
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout_s, max_retries=1)
        self._model = model
        self.server = base_url

    async def _model_name(self) -> str:
        """The configured model, else the first the server lists."""
        if not self._model:
            page = await self._client.models.list()
            self._model = next(iter(card.id for card in page.data), "")
        return self._model

    async def embed(self, texts: Sequence[str]) -> list[bytes] | None:
        """Each text's unit vector as float32 bytes; None when the server fails (said in the log)."""
        try:
            model = await self._model_name()
            vectors: list[bytes] = []
            for start in range(0, len(texts), BATCH):
                reply = await self._client.embeddings.create(model=model, input=list(texts[start : start + BATCH]))
                vectors += [unit(item.embedding).tobytes() for item in sorted(reply.data, key=lambda d: d.index)]
            return vectors
        except openai.OpenAIError as error:
            logger.warning("Embeddings: %s did not answer (%s); the keyword search goes on alone", self.server, error)
            return None
        except (AttributeError, TypeError, ValueError) as error:  # the SDK's reading of an answer of another kind
            logger.warning(
                "Embeddings: %s answered no embeddings (%r); the keyword search goes on alone", self.server, error
            )
            return None

    async def aclose(self) -> None:
        await self._client.close()


def unit(vector: Sequence[float]) -> np.ndarray:
    """A vector scaled to length 1 (float32), so that a dot product is the cosine."""
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


@dataclass(frozen=True)
class Vectors:
    """A document's passages' vectors: their ids, and a matrix of one unit vector a row (float32)."""

    ids: list[int]
    matrix: np.ndarray


def vectors_of(stored: Sequence[tuple[int, bytes]]) -> Vectors:
    """A document's stored vectors as one matrix (all of one size: one model embedded them)."""
    if not stored:
        return Vectors([], np.zeros((0, 0), dtype=np.float32))
    matrix = np.frombuffer(b"".join(vector for _, vector in stored), dtype=np.float32).reshape(len(stored), -1)
    return Vectors([passage for passage, _ in stored], matrix)


def nearest(query: bytes, documents: Sequence[Vectors]) -> list[tuple[int, float]]:
    """The ids of the documents' passages by their vectors' cosine with the query's, closest first (vectors of
    another size than the query's left out), each with its cosine."""
    wanted = np.frombuffer(query, dtype=np.float32)
    same = [document for document in documents if document.matrix.shape[1:] == wanted.shape]
    if not same:
        return []
    ids = [passage for document in same for passage in document.ids]
    cosines = np.concatenate([document.matrix @ wanted for document in same])
    order = np.argsort(-cosines, kind="stable")
    return [(ids[i], float(cosines[i])) for i in order]


def fused(*rankings: Sequence[int]) -> list[int]:
    """Reciprocal rank fusion of rankings of passage ids: found high by either method, or by both, first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, passage in enumerate(ranking, start=1):
            scores[passage] = scores.get(passage, 0.0) + 1.0 / (FUSION_K + rank)
    return sorted(scores, key=lambda passage: (-scores[passage], passage))
