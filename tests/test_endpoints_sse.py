"""The server-sent events decoder of the endpoint client (stablearena.judging.endpoints.client), and a
streamed answer read through it from a real loopback server that cuts the stream anywhere."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena.judging.endpoints import EndpointClient, ModelEndpoint
from stablearena.judging.endpoints.client import SSEDecoder


def feed_all(pieces: list[bytes]) -> list[bytes]:
    d = SSEDecoder()
    out = [x for p in pieces for x in d.feed(p)]
    return out + d.close()


def chunk(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    obj = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def test_events_lines_and_fields():
    raw = b': comment\n\nevent: x\nid: 3\ndata: {"a": 1}\n\ndata:[DONE]\n\n'
    assert feed_all([raw]) == [b'{"a": 1}', b"[DONE]"]


def test_multi_line_data_joined_and_crlf():
    raw = b'data: {"a":\r\ndata:  1}\r\n\r\nretry: 10\r\n\r\ndata\r\n\r\n'
    assert feed_all([raw]) == [b'{"a":\n 1}', b""]


def test_cr_split_from_lf_across_reads():
    assert feed_all([b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n"]) == [b"1", b"2"]


def test_unterminated_last_event_is_kept_at_close():
    d = SSEDecoder()
    assert d.feed(b"data: 1\n\ndata: [DONE]") == [b"1"]
    assert d.close() == [b"[DONE]"] and d.close() == []


def test_multibyte_character_split_across_reads():
    raw = chunk("naïve 日本語 🙂")
    cut = raw.index("日".encode()) + 1  # inside the character's three bytes
    got = feed_all([raw[:cut], raw[cut:]])
    assert [json.loads(x)["choices"][0]["delta"]["content"] for x in got] == ["naïve 日本語 🙂"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8),
    st.lists(st.integers(1, 400), max_size=12),
    st.booleans(),
)
def test_any_cut_gives_the_same_events(texts, cuts, crlf):
    raw = b"".join(chunk(t) for t in texts) + b"data: [DONE]\n\n"
    if crlf:
        raw = raw.replace(b"\n", b"\r\n")
    pos = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *pos], [*pos, len(raw)], strict=True)]
    got = feed_all(pieces)
    assert got[-1] == b"[DONE]"
    assert [json.loads(x)["choices"][0]["delta"]["content"] for x in got[:-1]] == texts


# ------------------------------------------------------------- a real server cutting a stream
class CuttingServer:
    """A loopback HTTP server answering every request with ``body`` (server-sent events),
    written in the given pieces with a flush and a pause between them."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = pieces
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(65536)
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Connection: close\r\n\r\n"
                )
                for p in self.pieces:
                    conn.sendall(p)
                    threading.Event().wait(0.01)

    def close(self) -> None:
        self.sock.close()


def stream_from(pieces: list[bytes]):
    server = CuttingServer(pieces)
    got: list[str] = []

    async def go():
        ep = ModelEndpoint(name="m", base_url=server.url, model="m", max_retries=0)
        async with EndpointClient(ep) as c:
            return await c.complete(c.messages("hi"), got.append)

    try:
        return asyncio.run(go()), got
    finally:
        server.close()


def test_stream_cut_inside_a_character_and_a_line():
    raw = chunk("Grüße, ") + chunk("世界") + chunk(None, "stop") + b"data: [DONE]\n\n"
    cuts = [raw.index("ü".encode()) + 1, raw.index(b"\n\n") + 1, raw.index("界".encode()) + 2]
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    ans, deltas = stream_from(pieces)
    assert ans.ok and ans.text == "Grüße, 世界" and ans.finish_reason == "stop"
    assert "".join(deltas) == ans.text and ans.completion_tokens == 2  # two content deltas


def test_pieces_of_one_read_relayed_at_once():
    raw = chunk("a") + chunk("b") + chunk("c", "stop") + b"data: [DONE]\n\n"
    ans, deltas = stream_from([raw])
    assert ans.text == "abc" and deltas == ["abc"] and ans.completion_tokens == 3


@pytest.mark.parametrize(
    ("pieces", "reason"),
    [
        ([chunk("a"), b"data: {not json\n\n"], "bad_response"),
        ([chunk("a"), b'data: {"error": {"message": "boom"}}\n\n'], "http_500"),
        ([chunk("a"), chunk("b")], "dropped"),  # no [DONE], no finish reason
        ([b'data: "\xff\xfe"\n\n'], "bad_response"),  # not UTF-8
    ],
)
def test_malformed_streams_fail(pieces, reason):
    ans, _ = stream_from(pieces)
    assert not ans.ok and ans.reason == reason


def test_finish_without_done_and_keepalives():
    ans, _ = stream_from([b"data:\n\n", b": ping\n\n", chunk("x"), chunk(None, "length")])
    assert ans.ok and ans.text == "x" and ans.finish_reason == "length"
