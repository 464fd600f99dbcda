"""Models as endpoints, tested against the real demo server (a subprocess on loopback)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from stablearena.errors import InputError
from stablearena.judging.endpoints import (
    EndpointClient,
    Failure,
    ModelEndpoint,
    OfflineClient,
    OfflineModel,
    make_client,
    read_models,
)
from stablearena.judging.endpoints.client import CircuitBreaker, parse_retry_after
from stablearena.judging.endpoints.demo import (
    DEMO_MODELS,
    demo_answer,
    demo_prompts,
    is_correct,
    truth,
)
from stablearena.judging.endpoints.demo_server import DemoServer, tokens

PROMPT = "What is 17*23?"


@pytest.fixture(scope="module")
def server():
    with DemoServer(seed=0) as s:
        yield s


def endpoint(server, model: str, **kw) -> ModelEndpoint:
    kw.setdefault("backoff", 0.01)
    return ModelEndpoint(name=model.split("+")[0], base_url=server.base_url, model=model, **kw)


def call(ep: ModelEndpoint, prompt: str = PROMPT, client: EndpointClient | None = None):
    async def go():
        c = client or EndpointClient(ep)
        try:
            return await c.answer(prompt)
        finally:
            if client is None:
                await c.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [True, False])
def test_answer_streaming_and_not(server, stream):
    ans = call(endpoint(server, "demo-ace", stream=stream))
    assert ans.ok and ans.text == demo_answer(DEMO_MODELS[0], PROMPT, 0)
    assert "391" in ans.text and ans.finish_reason == "stop" and ans.attempts == 1
    assert ans.usage_source == "server"
    assert ans.completion_tokens == len(tokens(ans.text)) and ans.prompt_tokens == 3
    assert 0 < ans.ttft <= ans.total_time


def test_streamed_tokens_counted_without_usage(server):
    ans = call(endpoint(server, "demo-ace", stream_usage=False))
    assert ans.usage_source == "estimated"
    assert ans.completion_tokens == len(tokens(ans.text))  # one delta per token


def test_ttft_is_the_first_token_not_the_last(server):
    ans = call(endpoint(server, "demo-ace+slow=0.05"))
    n = len(tokens(ans.text))
    # the server sleeps 0.05 s before each token: the last comes (n - 1) sleeps after the
    # first; half of that leaves room for a late first read on a busy machine
    assert ans.total_time >= 0.05 * n and ans.total_time - ans.ttft >= 0.05 * (n - 1) / 2


def test_max_tokens_gives_length_finish(server):
    ans = call(endpoint(server, "demo-ace", params={"max_tokens": 3}))
    assert ans.finish_reason == "length" and ans.completion_tokens == 3


def test_slow_model_times_out(server):
    """Each token comes within 0.3 s, under the 0.4 s timeout: only a deadline on the whole
    answer (about 6 s of tokens) can end it, so the reason says the timeout path was taken."""
    res = call(endpoint(server, "demo-ace+slow=0.3+id=t1", timeout=0.4, max_retries=1))
    assert isinstance(res, Failure) and res.reason == "timeout" and res.attempts == 2


@pytest.mark.parametrize("stream", [True, False])
def test_failing_model_retries_then_fails(server, stream):
    name = f"demo-ace+fail500+id=f{stream}"
    res = call(endpoint(server, name, max_retries=2, stream=stream))
    assert isinstance(res, Failure) and res.reason == "http_500" and res.attempts == 3
    assert server.stats()[name]["requests"] == 3


def test_flaky_model_answers_after_retries(server):
    res = call(endpoint(server, "demo-ace+flaky=2", max_retries=3))
    assert res.ok and res.attempts == 3


def test_dropped_stream_is_a_failure(server):
    res = call(endpoint(server, "demo-ace+drop", max_retries=1))
    assert isinstance(res, Failure) and res.reason == "dropped" and res.attempts == 2


def test_unknown_model_is_not_retried(server):
    res = call(endpoint(server, "no-such-model", max_retries=3))
    assert isinstance(res, Failure) and res.reason == "http_404" and res.attempts == 1


def test_rate_limit_honours_retry_after(server):
    name = "demo-ace+r429=1:1.0"
    ep = endpoint(server, name, max_retries=2, backoff=0.0)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # the real wait, recorded
        slept.append(seconds)
        await asyncio.sleep(seconds)

    client = EndpointClient(ep, sleep=sleep)
    res = call(ep, client=client)
    assert res.ok and res.attempts == 2
    assert client.waits == [1.0] and slept == [1.0]
    arrivals = server.stats()[name]["arrivals"]
    assert arrivals[1] - arrivals[0] >= 1.0


def test_rate_limit_longer_than_allowed_fails_at_once(server):
    res = call(endpoint(server, "demo-ace+r429=5:120", max_retries=3, max_retry_after=10))
    assert isinstance(res, Failure) and res.reason == "rate_limited" and res.attempts == 1


def test_retry_after_http_date():
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after("soon") is None


def test_outage_after_failures_and_recovery(server):
    name = "demo-ace+flaky=3"
    ep = endpoint(server, name, max_retries=0, outage_after=2, outage_cooldown=0.3)

    async def go():
        async with EndpointClient(ep) as c:
            out = [await c.answer(PROMPT) for _ in range(3)]  # fail, fail, outage
            assert c.breaker.under_outage
            await asyncio.sleep(0.35)
            out.append(await c.answer(PROMPT))  # the probe: request 3 fails again
            out.append(await c.answer(PROMPT))  # outage again
            await asyncio.sleep(0.35)
            out += [await c.answer(PROMPT), await c.answer(PROMPT)]  # probe answers; closed
            assert not c.breaker.under_outage
            return out

    out = asyncio.run(go())
    reasons = [r.reason if isinstance(r, Failure) else "ok" for r in out]
    assert reasons == ["http_500", "http_500", "outage", "http_500", "outage", "ok", "ok"]
    assert server.stats()[name]["requests"] == 5  # no request while under outage


def test_breaker_unit():
    now = [0.0]
    b = CircuitBreaker(3, 10.0, clock=lambda: now[0])
    for _ in range(2):
        b.record(False)
    assert b.allow() and not b.under_outage
    b.record(False)
    assert not b.allow()
    now[0] = 10.0
    assert b.allow() and not b.allow()  # one probe at a time
    b.record(True)
    assert b.allow() and b.failures == 0


@pytest.mark.parametrize("bound, calls", [(2, 6), (20, 30)])
def test_concurrency_is_bounded(server, bound, calls):
    """``calls`` calls at once with max_concurrency = ``bound``: ``bound`` in flight together,
    never more."""
    name = f"demo-ace+slow=0.05+id=conc{bound}"
    ep = endpoint(server, name, max_concurrency=bound)

    async def go():
        async with EndpointClient(ep) as c:
            return await asyncio.gather(*(c.answer(PROMPT) for _ in range(calls)))

    assert all(r.ok for r in asyncio.run(go()))
    assert server.stats()[name]["in_flight_max"] == bound


@pytest.mark.parametrize("stream", [True, False])
def test_calls_one_after_another_reuse_one_connection(server, stream):
    """Connections are kept alive and reused (a stream is read to its end after [DONE]): five
    calls in a row come to the server on one connection, not five."""
    name = f"demo-ace+id=reuse-{stream}"
    ep = endpoint(server, name, max_concurrency=4, stream=stream)

    async def go():
        async with EndpointClient(ep) as c:
            return [await c.answer(PROMPT) for _ in range(5)]

    assert all(r.ok for r in asyncio.run(go()))
    assert server.stats()[name]["requests"] == 5
    assert server.stats()[name]["peers"] == 1


def test_proxy_from_the_environment(monkeypatch):
    """HTTP(S)_PROXY is honoured for the endpoint's scheme, NO_PROXY exempts its host."""
    from stablearena.judging.endpoints.client import _env_proxy

    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.lower(), raising=False)
    assert _env_proxy("https://api.example.com/v1/chat/completions") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    assert _env_proxy("https://api.example.com/v1/x") == "http://proxy.local:3128"
    assert _env_proxy("http://127.0.0.1:8001/v1/x") is None  # no HTTP_PROXY
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    assert _env_proxy("https://api.example.com/v1/x") is None


def test_key_never_leaks(monkeypatch, caplog, tmp_path):
    secret = "sk-test-SECRET-4242"
    monkeypatch.setenv("DEMO_SERVER_KEY", secret)
    monkeypatch.setenv("DEMO_CLIENT_KEY", secret)
    caplog.set_level(logging.DEBUG)
    with DemoServer(api_key_env="DEMO_SERVER_KEY") as s:
        ep = endpoint(s, "demo-ace", api_key_env="DEMO_CLIENT_KEY")
        client = EndpointClient(ep)
        ans = call(ep, client=client)
        assert ans.ok
        monkeypatch.setenv("DEMO_CLIENT_KEY", "sk-wrong-OTHER-1")
        bad = call(endpoint(s, "demo-ace", api_key_env="DEMO_CLIENT_KEY", max_retries=2))
        assert isinstance(bad, Failure) and bad.reason == "unauthorized" and bad.attempts == 1
        assert "DEMO_CLIENT_KEY" in bad.detail
        nokey = call(endpoint(s, "demo-ace"))
        assert isinstance(nokey, Failure) and nokey.reason == "unauthorized"
    toml = tmp_path / "models.toml"
    toml.write_text(
        f'[[models]]\nname = "a"\nbase_url = "{s.base_url}"\nmodel = "demo-ace"\n'
        'api_key_env = "DEMO_CLIENT_KEY"\n'
    )
    [loaded] = read_models(toml)
    texts = [
        repr(ep),
        str(ep),
        repr(client),
        json.dumps(ep.to_record()),
        repr(loaded),
        json.dumps(loaded.to_record()),
        repr(ans),
        json.dumps(ans.to_record()),
        repr(bad),
        caplog.text,
    ]
    for text in texts:
        assert secret not in text and "sk-wrong" not in text


def test_models_toml(tmp_path):
    (tmp_path / "a.jsonl").write_text(
        json.dumps(
            {
                "question_id": "p1",
                "model_id": "m",
                "choices": [{"index": 0, "turns": [{"content": "hi"}]}],
            }
        )
        + "\n"
    )
    path = tmp_path / "models.toml"
    path.write_text(
        "[defaults]\ntimeout = 5\n\n"
        '[[models]]\nname = "ace"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "demo-ace"\n'
        'system_prompt = "Be brief."\nmax_concurrency = 2\n'
        "params = { temperature = 0.0, max_tokens = 64 }\n"
        "price = { prompt = 1.0, completion = 2.0 }\n\n"
        '[[models]]\nname = "old"\nanswers = "' + str(tmp_path / "a.jsonl") + '"\n'
    )
    ace, old = read_models(path)
    assert ace.timeout == 5 and ace.params["max_tokens"] == 64 and ace.max_concurrency == 2
    assert ace.price.cost(1_000_000, 500_000) == 2.0
    assert EndpointClient(ace).messages("q")[0] == {"role": "system", "content": "Be brief."}
    assert isinstance(old, OfflineModel) and isinstance(make_client(old), OfflineClient)
    for bad, words in [
        (
            '[[models]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\napi_key = "sk"\n',
            "api_key_env",
        ),
        (
            '[[models]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\ntemprature = 1\n',
            "temprature",
        ),
        ('[[models]]\nname = "a"\nbase_url = "x"\nmodel = "m"\n', "base_url"),
        ('[[models]]\nname = "a"\nbase_url = "http://x"\nmodel = "m"\n' * 2, "unique"),
        ("x = 1\n", "[[models]]"),
    ]:
        path.write_text(bad)
        with pytest.raises(InputError, match=words.replace("[", r"\[")):
            read_models(path)


def test_offline_answers_both_shapes(tmp_path):
    v1 = tmp_path / "v1.jsonl"
    v1.write_text(
        "\n".join(
            json.dumps(
                {
                    "question_id": q,
                    "answer_id": "x",
                    "model_id": m,
                    "tstamp": 0,
                    "choices": [{"index": 0, "turns": [{"content": f"{m}:{q}"}]}],
                }
            )
            for m in ("m1", "m2")
            for q in ("p1", "p2")
        )
    )
    v2 = tmp_path / "v2.jsonl"
    v2.write_text(
        json.dumps(
            {
                "uid": "u1",
                "model": "m3",
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": {"answer": "the answer"}},
                ],
            }
        )
    )
    with pytest.raises(InputError, match="several models"):
        OfflineClient(OfflineModel("x", v1))
    c = OfflineClient(OfflineModel("x", v1, "m2"))
    ans = asyncio.run(c.answer("q", "p2"))
    assert ans.ok and ans.text == "m2:p2" and ans.model == "x"
    miss = asyncio.run(c.answer("q", "p9"))
    assert isinstance(miss, Failure) and miss.reason == "no_answer"
    assert asyncio.run(OfflineClient(OfflineModel("y", v2)).answer("q", "u1")).text == "the answer"


def test_demo_models_have_their_error_rates():
    prompts = [p["prompt"] for p in demo_prompts(2000, seed=1)]
    assert all(truth(p) is not None for p in prompts)
    for model in (DEMO_MODELS[0], DEMO_MODELS[-1]):
        wrong = sum(not is_correct(p, demo_answer(model, p, 1)) for p in prompts) / len(prompts)
        assert abs(wrong - model.error_rate) < 0.035
