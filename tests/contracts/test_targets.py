"""Every provider keeps the Target contract: attributes, a secret-free describe, answers, failures.

A new provider must be added to BUILDERS; the first test fails until it is.
"""

from __future__ import annotations

import asyncio
import json
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import write_jsonl
from tests.targets.fakeapi import FakeAPI, Fault

from faultline.targets import (
    PROVIDERS,
    CallError,
    Completion,
    FailureKind,
    GenerationParams,
    Request,
    Target,
    TargetOptions,
    open_target,
)

KEY = "sk-contract-key-0123456789"
HEADER_SECRET = "contract-header-secret-42"
MODULE = "faultline_contract_model"
OK_PROMPT = "contract-ok"
FAIL_PROMPT = "contract-fail"


@dataclass(frozen=True)
class Setup:
    """What a builder gives: the spec to open and the options to open it with."""

    spec: str
    options: TargetOptions = field(default_factory=TargetOptions)
    params: GenerationParams = field(default_factory=GenerationParams)


@dataclass(frozen=True)
class Env:
    tmp_path: Path
    api: FakeAPI
    monkeypatch: pytest.MonkeyPatch


def _http(provider: str, env: Env) -> Setup:
    env.monkeypatch.setenv("CONTRACT_API_KEY", KEY)
    env.api.plan(FAIL_PROMPT, [Fault.error(400)])
    url = env.api.base_url if provider == "openai" else env.api.root_url
    return Setup(
        f"{provider}:contract-model",
        TargetOptions(base_url=url, api_key_env="CONTRACT_API_KEY"),
        GenerationParams(headers=(("X-Contract-Token", HEADER_SECRET),)),
    )


def _python(env: Env) -> Setup:
    env.monkeypatch.chdir(env.tmp_path)
    env.monkeypatch.syspath_prepend(str(env.tmp_path))
    (env.tmp_path / f"{MODULE}.py").write_text(
        "def generate(messages, **kwargs):\n"
        f"    if {FAIL_PROMPT!r} in messages[-1]['content']:\n"
        "        raise ValueError('asked to fail')\n"
        "    return 'a python answer'\n",
        encoding="utf-8",
    )
    return Setup(f"python:{MODULE}:generate")


def _replay(env: Env) -> Setup:
    path = write_jsonl(
        env.tmp_path / "contract.jsonl",
        [{"probe_id": OK_PROMPT, "response": "a recorded answer", "model": "recorded"}],
    )
    return Setup(f"replay:{path}")


BUILDERS: dict[str, Callable[[Env], Setup]] = {
    "openai": lambda env: _http("openai", env),
    "anthropic": lambda env: _http("anthropic", env),
    "python": _python,
    "replay": _replay,
}


def test_every_provider_has_a_builder() -> None:
    assert set(BUILDERS) == set(PROVIDERS), "add a builder for each provider in PROVIDERS"


@pytest.fixture(params=sorted(BUILDERS))
def opened(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fake_api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, Target]]:
    provider: str = request.param
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    setup = BUILDERS[provider](Env(tmp_path, fake_api, monkeypatch))
    target = open_target(setup.spec, setup.params, setup.options)
    try:
        yield provider, target
    finally:
        asyncio.run(target.aclose())  # again, for the tests that never called it
        sys.modules.pop(MODULE, None)


def call(target: Target, prompt: str) -> Completion | CallError:
    """Send one request and close the target on the same event loop (a pooled HTTP client
    belongs to the loop it first ran on)."""

    async def go() -> Completion | CallError:
        try:
            return await target.complete(Request(prompt, 0, ({"role": "user", "content": prompt},)))
        except CallError as exc:
            return exc
        finally:
            await target.aclose()

    return asyncio.run(go())


def known_secrets(target: Target) -> list[str]:
    return [*target.secrets, KEY, HEADER_SECRET]


def test_open_target_gives_the_target_attributes(opened: tuple[str, Target]) -> None:
    provider, target = opened
    assert target.provider == provider
    assert target.spec.startswith(f"{provider}:")
    assert isinstance(target.model, str)
    assert target.model
    assert isinstance(target.secrets, tuple)
    assert all(isinstance(s, str) for s in target.secrets)


def test_the_spec_holds_no_secret(opened: tuple[str, Target]) -> None:
    _, target = opened
    for secret in known_secrets(target):
        assert secret not in target.spec


def test_describe_is_json_with_spec_and_provider_and_no_secret(
    opened: tuple[str, Target],
) -> None:
    provider, target = opened
    described: dict[str, Any] = target.describe()
    text = json.dumps(described)
    assert described["spec"] == target.spec
    assert described["provider"] == provider
    assert "model" in described
    for secret in known_secrets(target):
        assert secret not in text


def test_a_simple_request_gets_a_completion_with_text(opened: tuple[str, Target]) -> None:
    _, target = opened
    result = call(target, OK_PROMPT)
    assert isinstance(result, Completion), result
    assert isinstance(result.text, str)
    assert result.text


def test_a_failed_call_is_a_call_error_of_a_known_kind(opened: tuple[str, Target]) -> None:
    _, target = opened
    result = call(target, FAIL_PROMPT)
    assert isinstance(result, CallError), result
    assert result.kind in typing.get_args(FailureKind)
    assert not result.retryable
    for secret in known_secrets(target):
        assert secret not in result.message


def test_aclose_may_be_called_again(opened: tuple[str, Target]) -> None:
    _, target = opened
    assert isinstance(call(target, OK_PROMPT), Completion)
    assert asyncio.run(target.aclose()) is None
