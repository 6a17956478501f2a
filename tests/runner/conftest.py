"""Fixtures for the runner tests: a clean environment for the API targets."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's keys, endpoints and proxies out of these runs."""
    proxies = [f"{s}_proxy" for s in ("http", "https", "all", "no")]
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        *proxies,
        *(p.upper() for p in proxies),
    ):
        monkeypatch.delenv(name, raising=False)
