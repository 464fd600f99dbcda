"""Calling models: OpenAI-compatible chat-completions endpoints and offline answer files.

* :mod:`.config` — :class:`ModelEndpoint`, :class:`OfflineModel`, ``models.toml``;
* :mod:`.client` — :class:`EndpointClient` (streaming, retries, outage) returning an
  :class:`Answer` or a :class:`Failure`;
* :mod:`.offline` — answers read from Arena-Hard-Auto's ``model_answer`` JSONL;
* :mod:`.demo` and :mod:`.demo_server` — demo models and judges of known quality and the local
  OpenAI-compatible server that serves them; :mod:`.demo_chat` — the demo models' Markdown
  answers to any prompt and follow-up, composed from bundled text (``data/demo_chat.json``).
"""

from __future__ import annotations

from . import client, config, offline
from .client import *  # noqa: F403  (each submodule's __all__ is the package's public names)
from .client import EndpointClient
from .config import *  # noqa: F403
from .config import ModelEndpoint, OfflineModel
from .offline import *  # noqa: F403
from .offline import OfflineClient

__all__ = [*client.__all__, *config.__all__, *offline.__all__, "make_client"]


def make_client(model: ModelEndpoint | OfflineModel, **options) -> EndpointClient | OfflineClient:  # noqa: ANN003
    """The client of a configured model (``options`` go to :class:`EndpointClient`)."""
    if isinstance(model, OfflineModel):
        return OfflineClient(model)
    return EndpointClient(model, **options)
