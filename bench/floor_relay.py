"""The floor for ``bench_arena.py --target floor``: the least a one-process Python relay of held
battles can do, to measure what any such relay adds to the time to first token.

It answers the three routes ``bench_arena.py`` uses as the arena does (``GET /arena`` with a
CSRF token, ``POST /arena/battles`` streaming both answers as NDJSON lines, ``POST
/arena/battles/{id}/vote``) on a bare asyncio server (uvloop, no framework, hand-parsed
HTTP/1.1 with keep-alive), calls the two models with the arena's own client
(:class:`stablearena.judging.endpoints.EndpointClient`), and relays each piece as it arrives. It
chooses no pair, stores nothing, checks no identity and counts no vote: whatever it adds is
the price of the extra hop and the client alone.

    python bench/floor_relay.py MODEL_BASE_URL SLOW [N]   # prints "floor listening on URL"

``N`` (default 1,000) is each model's ``max_concurrency``, as ``bench_arena.py`` gives the
arena's models the battles in flight: with a smaller pool the floor queued calls of its own (at
1,000 in flight and a pool of 400 it added 5.6 s to the first token) and was no floor.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

from stablearena.judging.endpoints import EndpointClient, ModelEndpoint

MODELS = ("demo-ace", "demo-wild")
PAGE = b'<html><head><meta name="csrf-token" content="floor"></head><body></body></html>'


def _head(status: str, ctype: str, length: int | None) -> bytes:
    size = (
        b"Transfer-Encoding: chunked\r\n" if length is None else b"Content-Length: %d\r\n" % length
    )
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\n%s\r\n" % (status.encode(), ctype.encode(), size)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def battle(w: asyncio.StreamWriter, clients: list[EndpointClient], prompt: str) -> None:
    w.write(_head("200 OK", "application/x-ndjson", None))
    w.write(_chunk(json.dumps({"battle_id": uuid.uuid4().hex}).encode() + b"\n"))

    async def one(side: str, c: EndpointClient) -> None:
        def emit(delta: str | None) -> None:
            if delta is not None:
                w.write(_chunk(json.dumps({"side": side, "delta": delta}).encode() + b"\n"))

        await c.complete(c.messages(prompt), emit)

    await asyncio.gather(*(one(s, c) for s, c in zip("ab", clients, strict=True)))
    w.write(_chunk(json.dumps({"done": True, "status": "complete", "failure": None}).encode()))
    w.write(b"0\r\n\r\n")
    await w.drain()


async def serve_conn(
    r: asyncio.StreamReader, w: asyncio.StreamWriter, clients: list[EndpointClient]
) -> None:
    try:
        while True:
            head = await r.readuntil(b"\r\n\r\n")
            line, *fields = head.decode("latin-1").split("\r\n")
            method, path, _ = line.split(" ", 2)
            length = 0
            for f in fields:
                if f.lower().startswith("content-length:"):
                    length = int(f.split(":", 1)[1])
            body = await r.readexactly(length) if length else b""
            if method == "GET":
                w.write(_head("200 OK", "text/html", len(PAGE)) + PAGE)
            elif path == "/arena/battles":
                await battle(w, clients, json.loads(body)["prompt"])
            else:  # a vote: counted nowhere
                w.write(_head("200 OK", "application/json", 2) + b"{}")
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        w.close()


async def main(base_url: str, slow: float, n: int) -> None:
    clients = [
        EndpointClient(
            ModelEndpoint(name=m, base_url=base_url, model=f"{m}+slow={slow}", max_concurrency=n)
        )
        for m in MODELS
    ]
    server = await asyncio.start_server(lambda r, w: serve_conn(r, w, clients), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"floor listening on http://127.0.0.1:{port} ", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    import uvloop

    uvloop.run(
        main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1000)
    )
