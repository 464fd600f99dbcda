"""Shared fixtures: paths to the real data beside the checkout (tests skip when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA_DIR = Path(
    os.environ.get(
        "STABLEARENA_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
    )
)
LLMFAO = DATA_DIR / "llmfao.csv"
CHATBOT_ARENA = DATA_DIR / "chatbot_arena_20240814_pairs.json"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(
            f"real data not available: {path} is absent (it lives in ../shared/data beside the checkout)"
        )
    return path


@pytest.fixture
def llmfao_path() -> Path:
    return _need(LLMFAO)


@pytest.fixture
def chatbot_arena_path() -> Path:
    return _need(CHATBOT_ARENA)
