"""Calling models: OpenAI-compatible chat-completions endpoints and offline answer files.

* :mod:`.config` — :class:`ModelEndpoint`, :class:`OfflineModel`, ``models.toml``;
* :mod:`.client` — :class:`EndpointClient` (streaming, retries, outage) returning an
  :class:`Answer` or a :class:`Failure`;
* :mod:`.offline` — answers read from Arena-Hard-Auto's ``model_answer`` JSONL;
* :mod:`.demo` and :mod:`.demo_server` — demo models and judges of known quality and the local
  OpenAI-compatible server that serves them.
"""

from __future__ import annotations

from .client import Answer, CircuitBreaker, EndpointClient, Failure, Result
from .config import ModelEndpoint, OfflineModel, Price, read_models
from .offline import OfflineClient, read_model_answers

__all__ = [
    "Answer",
    "Failure",
    "Result",
    "CircuitBreaker",
    "EndpointClient",
    "ModelEndpoint",
    "OfflineModel",
    "OfflineClient",
    "Price",
    "read_models",
    "read_model_answers",
    "make_client",
]


def make_client(model: ModelEndpoint | OfflineModel, **options) -> EndpointClient | OfflineClient:  # noqa: ANN003
    """The client of a configured model (``options`` go to :class:`EndpointClient`)."""
    if isinstance(model, OfflineModel):
        return OfflineClient(model)
    return EndpointClient(model, **options)
