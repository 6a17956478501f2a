"""A Python callable as the target: imports, the arguments it gets, what it returns, how it fails."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import UsageError
from faultline.targets import (
    CallError,
    Completion,
    GenerationParams,
    Request,
    TargetOptions,
    open_target,
)
from faultline.targets.python import PythonTarget
from tests.targets import calls
from tests.targets.calls import run

_names = itertools.count()

Write = Callable[[str], str]


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Write]:
    """Write a module into tmp_path (the current directory) and return its unique name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str) -> str:
        name = f"faultline_user_model_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def request(
    prompt: str = "hello", *, sample: int = 0, params: GenerationParams | None = None
) -> Request:
    return Request(
        "p-1", sample, ({"role": "user", "content": prompt},), params or GenerationParams()
    )


def answer(t: Any, req: Request | None = None) -> Completion:
    return calls.answer(t, req or request())


def failure(t: Any, req: Request | None = None) -> CallError:
    return calls.failure(t, req or request())


def target(write_module: Write, source: str, fn: str = "generate", **kw: Any) -> PythonTarget:
    return PythonTarget(f"{write_module(source)}:{fn}", kw.pop("params", GenerationParams()), **kw)


# --------------------------------------------------------------------------- calling


def test_a_sync_function_answers(write_module: Write) -> None:
    t = target(
        write_module, "def generate(messages):\n    return 'pong: ' + messages[-1]['content']\n"
    )
    assert answer(t, request("ping")) == Completion(text="pong: ping")


def test_an_async_function_is_awaited(write_module: Write) -> None:
    source = """
        import asyncio

        async def generate(messages):
            await asyncio.sleep(0)
            return 'async ' + messages[-1]['content']
    """
    assert answer(target(write_module, source), request("hi")).text == "async hi"


def test_an_object_with_an_async_call_is_awaited(write_module: Write) -> None:
    source = """
        class Model:
            async def __call__(self, messages, *, sample):
                return f'sample {sample}'

        model = Model()
    """
    assert answer(target(write_module, source, "model"), request(sample=3)).text == "sample 3"


def test_a_dotted_attribute_names_a_method(write_module: Write) -> None:
    source = """
        class Model:
            @staticmethod
            def generate(messages):
                return 'static'
    """
    assert answer(target(write_module, source, "Model.generate")).text == "static"


def test_the_function_gets_the_messages_as_plain_dicts(write_module: Write) -> None:
    source = """
        import json

        def generate(messages):
            assert all(type(m) is dict for m in messages)
            return json.dumps(messages)
    """
    conversation = (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    )
    text = answer(target(write_module, source), Request("p", 0, conversation)).text
    assert json.loads(text) == [dict(m) for m in conversation]


def test_sync_functions_run_concurrently_in_threads(write_module: Write) -> None:
    # Both calls must be inside the function at once for the barrier to open.
    source = """
        import threading

        barrier = threading.Barrier(2, timeout=10)

        def generate(messages):
            barrier.wait()
            return 'through'
    """
    results = run(target(write_module, source, concurrency=2), request("a"), request("b"))
    assert [r.text for r in results] == ["through", "through"]


PARAMS = GenerationParams(temperature=0.5, max_tokens=64, seed=10)
ALL_OFFERED = {"probe_id": "p-1", "sample": 2, "temperature": 0.5, "max_tokens": 64, "seed": 12}


@pytest.mark.parametrize(
    ("signature", "returned", "expected"),
    [
        ("messages", "{}", {}),
        (
            "messages, probe_id, sample",
            "dict(probe_id=probe_id, sample=sample)",
            {"probe_id": "p-1", "sample": 2},
        ),
        (
            "messages, *, temperature=None, max_tokens=None, seed=None",
            "dict(temperature=temperature, max_tokens=max_tokens, seed=seed)",
            {"temperature": 0.5, "max_tokens": 64, "seed": 12},
        ),
        (
            "messages, seed, other='mine'",
            "dict(seed=seed, other=other)",
            {"seed": 12, "other": "mine"},
        ),
        ("messages, **kwargs", "kwargs", ALL_OFFERED),
        (
            "messages, *, sample, **rest",
            "dict(sample=sample, rest=rest)",
            {
                "sample": 2,
                "rest": {k: v for k, v in ALL_OFFERED.items() if k != "sample"},
            },
        ),
    ],
    ids=["none", "ids", "generation", "with-own-default", "var-keyword", "named-and-rest"],
)
def test_only_the_declared_keyword_arguments_are_passed(
    write_module: Write, signature: str, returned: str, expected: dict[str, Any]
) -> None:
    source = f"import json\n\ndef generate({signature}):\n    return json.dumps({returned})\n"
    t = target(write_module, source, params=PARAMS)
    assert json.loads(answer(t, request(sample=2, params=PARAMS)).text) == expected


def test_unset_generation_parameters_are_passed_as_none(write_module: Write) -> None:
    source = "import json\n\ndef generate(messages, **kw):\n    return json.dumps(kw)\n"
    kwargs = json.loads(answer(target(write_module, source)).text)
    assert kwargs == {
        "probe_id": "p-1",
        "sample": 0,
        "temperature": None,
        "max_tokens": None,
        "seed": None,
    }


# --------------------------------------------------------------------------- return values


def test_a_mapping_with_response_and_tokens_becomes_a_completion(write_module: Write) -> None:
    source = """
        def generate(messages):
            return {
                'response': 'hi',
                'model': 'local-7b',
                'finish_reason': 'length',
                'input_tokens': 5,
                'output_tokens': 1,
                'reasoning': 'Greet them.',
                'ignored': True,
            }
    """
    assert answer(target(write_module, source)) == Completion(
        text="hi",
        model="local-7b",
        finish_reason="length",
        input_tokens=5,
        output_tokens=1,
        reasoning="Greet them.",
    )


def test_a_mapping_with_bad_optional_fields_keeps_the_response(write_module: Write) -> None:
    source = """
        def generate(messages):
            return {'response': 'hi', 'model': 7, 'finish_reason': None,
                    'input_tokens': -1, 'output_tokens': True, 'reasoning': ['x']}
    """
    assert answer(target(write_module, source)) == Completion(text="hi")


def test_a_completion_is_returned_as_it_is(write_module: Write) -> None:
    source = """
        from faultline.targets import Completion

        def generate(messages):
            return Completion(text='done', model='m', finish_reason='stop', input_tokens=1)
    """
    assert answer(target(write_module, source)) == Completion(
        text="done", model="m", finish_reason="stop", input_tokens=1
    )


@pytest.mark.parametrize(
    "returned",
    [
        "'Sure \\udcff here'",
        "{'response': 'Sure \\udcff here', 'model': 'm\\ud800'}",
        "Completion(text='Sure \\udcff here', model='m\\ud800')",
    ],
    ids=["str", "mapping", "completion"],
)
def test_a_lone_surrogate_in_the_answer_becomes_u_fffd(write_module: Write, returned: str) -> None:
    source = f"from faultline.targets import Completion\n\ndef generate(messages):\n    return {returned}\n"
    completion = answer(target(write_module, source))
    assert completion.text == "Sure \ufffd here"
    assert completion.model in {None, "m\ufffd"}


def test_a_correctly_paired_surrogate_is_joined_into_its_character(write_module: Write) -> None:
    source = "def generate(messages):\n    return 'smile \\ud83d\\ude00'\n"
    assert answer(target(write_module, source)).text == "smile \U0001f600"


@pytest.mark.parametrize(
    ("returned", "type_name"),
    [
        ("None", "None"),
        ("42", "int"),
        ("b'bytes'", "bytes"),
        ("['a']", "list"),
        ("{'text': 'x'}", "dict"),
        ("{'response': 5}", "dict"),
    ],
)
def test_any_other_return_value_is_malformed(
    write_module: Write, returned: str, type_name: str
) -> None:
    t = target(write_module, f"def generate(messages):\n    return {returned}\n")
    error = failure(t)
    assert error.kind == "malformed"
    assert error.message.startswith(f"{t.spec} returned {type_name};")
    assert "'response' string" in error.message
    assert not error.retryable  # the function's code decides the type: it would return the same
    assert "not retried" in error.message


# --------------------------------------------------------------------------- failures

RAISED = [
    # raised, kind, retryable, message
    # The function's own TimeoutError is not faultline's --timeout: it was "no answer within 120 s".
    (
        "TimeoutError('slow backend')",
        "timeout",
        True,
        "TimeoutError: slow backend (raised by the function, not faultline's --timeout)",
    ),
    ("ConnectionError('backend down')", "connection", True, "ConnectionError: backend down"),
    ("ConnectionRefusedError('refused')", "connection", True, "ConnectionRefusedError: refused"),
    ("ValueError('bad input')", "exception", False, "ValueError: bad input"),
    ("KeyError('choices')", "exception", False, "KeyError: 'choices'"),
    ("RuntimeError()", "exception", False, "RuntimeError: "),
]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("raised", "kind", "retryable", "message"), RAISED, ids=[r[0].split("(")[0] for r in RAISED]
)
def test_a_raised_exception_becomes_its_kind_of_call_error(  # noqa: PLR0917 - one parameter per table column
    write_module: Write, asynchronous: bool, raised: str, kind: str, retryable: bool, message: str
) -> None:
    source = f"{'async ' if asynchronous else ''}def generate(messages):\n    raise {raised}\n"
    error = failure(target(write_module, source))
    assert (error.kind, error.retryable, error.fatal) == (kind, retryable, False)
    assert error.message.startswith(message)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_call_error_raised_by_the_function_passes_through(
    write_module: Write, asynchronous: bool
) -> None:
    source = f"""
        from faultline.targets import CallError

        {"async " if asynchronous else ""}def generate(messages):
            raise CallError('rate_limited', 'quota spent', status=429, retry_after=3.0)
    """
    error = failure(target(write_module, source))
    assert (error.kind, error.message, error.status, error.retry_after) == (
        "rate_limited",
        "quota spent",
        429,
        3.0,
    )


def test_an_async_timeout_inside_the_function_is_not_reported_as_faultlines_timeout(
    write_module: Write,
) -> None:
    source = """
        import asyncio

        async def generate(messages):
            async with asyncio.timeout(0.01):
                await asyncio.sleep(60)
    """
    error = failure(target(write_module, source))
    assert (error.kind, error.retryable) == ("timeout", True)
    assert error.message == "TimeoutError (raised by the function, not faultline's --timeout)"
    assert "120" not in error.message


@pytest.mark.parametrize("fn", ["generate", "wrapped"])
def test_a_sync_function_returning_a_coroutine_has_it_awaited(write_module: Write, fn: str) -> None:
    # It was "returned coroutine" (malformed), and a "never awaited" warning.
    source = """
        import asyncio
        import functools

        async def real(messages):
            await asyncio.sleep(0)
            return 'pong: ' + messages[-1]['content']

        def generate(messages):
            return real(messages)

        def decorate(f):
            @functools.wraps(f)
            def sync(*args, **kwargs):
                return f(*args, **kwargs)
            return sync

        wrapped = decorate(real)
    """
    t = target(write_module, source, fn)
    assert answer(t, request("ping")) == Completion(text="pong: ping")


def test_an_async_function_slower_than_the_timeout_is_a_timeout(write_module: Write) -> None:
    source = """
        import asyncio

        async def generate(messages):
            await asyncio.sleep(60)
            return 'late'
    """
    params = GenerationParams(timeout=0.05)
    error = failure(target(write_module, source, params=params), request(params=params))
    assert error.kind == "timeout"
    assert error.message == "no answer within 0.05 s"


def test_a_sync_function_slower_than_the_timeout_is_a_timeout(write_module: Write) -> None:
    source = """
        import threading

        release = threading.Event()

        def generate(messages):
            release.wait(60)
            return 'late'
    """
    params = GenerationParams(timeout=0.05)
    t = target(write_module, source, params=params)
    try:
        assert failure(t, request(params=params)).kind == "timeout"
    finally:
        sys.modules[t.model.partition(":")[0]].release.set()


def test_a_stuck_sync_call_does_not_make_later_calls_time_out(write_module: Write) -> None:
    # One thread's worth of concurrency: a pool would queue the second call behind the first.
    source = """
        import threading

        release = threading.Event()
        called = []

        def generate(messages, *, probe_id):
            called.append(probe_id)
            if probe_id == 'stuck':
                release.wait(60)
            return 'answered ' + probe_id
    """
    params = GenerationParams(timeout=0.5)
    t = target(write_module, source, params=params, concurrency=1)
    stuck = Request("stuck", 0, ({"role": "user", "content": "x"},), params)
    later = Request("later", 0, ({"role": "user", "content": "y"},), params)
    module = sys.modules[t.model.partition(":")[0]]

    async def one_after_the_other() -> list[Any]:
        try:
            first = await asyncio.gather(t.complete(stuck), return_exceptions=True)
            return [*first, await t.complete(later)]
        finally:
            await t.aclose()

    try:
        timed_out, answered = asyncio.run(one_after_the_other())
    finally:
        module.release.set()
    assert isinstance(timed_out, CallError)
    assert timed_out.kind == "timeout"
    assert answered == Completion(text="answered later")
    assert module.called == ["stuck", "later"]


def test_calls_beyond_the_concurrency_wait_without_spending_their_timeout(
    write_module: Write,
) -> None:
    source = """
        import threading, time

        running = []
        most = [0]
        lock = threading.Lock()

        def generate(messages):
            with lock:
                running.append(1)
                most[0] = max(most[0], len(running))
            time.sleep(0.3)
            with lock:
                running.pop()
            return 'ok'
    """
    params = GenerationParams(timeout=1.0)  # four calls one after another take 1.2 s
    t = target(write_module, source, params=params, concurrency=1)
    results = run(t, *(request(str(i), params=params) for i in range(4)))
    assert [r.text for r in results] == ["ok"] * 4
    assert sys.modules[t.model.partition(":")[0]].most == [1]


# --------------------------------------------------------------------------- opening


def test_open_target_opens_a_python_callable(write_module: Write) -> None:
    name = write_module("def generate(messages):\n    return 'ok'\n")
    t = open_target(f"python:{name}:generate")
    assert isinstance(t, PythonTarget)
    assert (t.spec, t.provider, t.model, t.secrets) == (
        f"python:{name}:generate",
        "python",
        f"{name}:generate",
        (),
    )
    assert t.describe() == {"spec": t.spec, "provider": "python", "model": t.model}
    assert answer(t).text == "ok"


def test_the_current_directory_is_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in {"", str(tmp_path)}])
    (tmp_path / "faultline_cwd_model.py").write_text("def generate(messages):\n    return 'cwd'\n")
    try:
        assert (
            answer(PythonTarget("faultline_cwd_model:generate", GenerationParams())).text == "cwd"
        )
    finally:
        sys.modules.pop("faultline_cwd_model", None)


@pytest.mark.parametrize(
    "option", [TargetOptions(base_url="http://localhost:1/v1"), TargetOptions(api_key_env="K")]
)
def test_api_options_are_refused_for_a_python_target(option: TargetOptions) -> None:
    with pytest.raises(UsageError, match="apply to API targets, not python"):
        open_target("python:anything:generate", options=option)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no_colon_here", "expected package.module:function"),
        ("module_only:", "expected package.module:function"),
        (":function_only", "expected package.module:function"),
        (
            "faultline_no_such_module_xyz:generate",
            "cannot import module 'faultline_no_such_module_xyz'",
        ),
        ("{module}:absent", "{module}.absent is not a callable"),
        ("{module}:CONSTANT", "{module}.CONSTANT is not a callable"),
        ("{module}:generate.missing", "{module}.generate.missing is not a callable"),
        ("{broken}:generate", "cannot import module '{broken}': RuntimeError: no GPU here"),
    ],
    ids=[
        "no-colon",
        "no-function",
        "no-module",
        "missing-module",
        "missing-name",
        "not-callable",
        "missing-attribute",
        "import-fails",
    ],
)
def test_a_bad_reference_is_a_usage_error_saying_what_is_wrong(
    write_module: Write, ref: str, message: str
) -> None:
    names = {
        "module": write_module("CONSTANT = 3\n\ndef generate(messages):\n    return ''\n"),
        "broken": write_module("raise RuntimeError('no GPU here')\n"),
    }
    with pytest.raises(UsageError) as info:
        PythonTarget(ref.format(**names), GenerationParams())
    assert message.format(**names) in str(info.value)
