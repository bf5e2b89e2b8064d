"""A local fake of the OpenAI embeddings endpoint (POST /v1/embeddings), on the shared
fake-server machinery: each input gets a deterministic vector (feature hashing), so
similar texts get similar vectors, like a real model but with no network."""

from __future__ import annotations

from memory.embeddings.hashing import HashingEmbedding
from tests.support.fake_http import FakeAPI, RecordedRequest, Scripted


class FakeEmbeddingsAPI(FakeAPI):
    route = "/v1/embeddings"
    url_suffix = "/v1"
    name = "fake embeddings API"

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.dim = dim
        self._hashing = HashingEmbedding(dim)


def embeddings_answer(api: FakeEmbeddingsAPI):
    """A responder: embeds whatever the request sent, in order."""

    def respond(request: RecordedRequest) -> Scripted:
        body = request.body
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = api._hashing.embed([str(t) for t in texts])
        return Scripted(
            200,
            {
                "object": "list",
                "model": body["model"],
                "data": [
                    {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                    for i, v in enumerate(vectors)
                ],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    return respond
