"""Property-based fuzzing of the request bodies of every route of the live arena (issue 32,
item 5): each route of the application's OpenAPI table (and the hidden sign-in forms) gets
bodies of any JSON shape, random bytes, wrong types, huge numbers, unicode names and admin
values, under any content type, with fuzzed path parameters. The invariant: a clear answer —
a 4xx with a JSON error, or success where the body is valid — never a 500, and never a stuck
state: after every request the arena still answers a valid one."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.data.names import clean_name
from stablearena.judging.endpoints.config import NUMERIC_BOUNDS
from stablearena.service.app import create_app
from stablearena.service.client import ArenaClient
from stablearena.service.settings import ArenaConfig, Settings

#: Routes left out of the OpenAPI table that take a body (forms).
HIDDEN = [("POST", "/arena/login"), ("POST", "/admin/login"), ("POST", "/admin/logout")]
#: Names the fixture relies on: a fuzzed path never addresses them (it would revoke the key
#: the stuck-state check uses).
KEPT = {"fuzzer", "admin"}

_huge = st.sampled_from(
    [10**30, -(10**30), 2**63, -(2**63) - 1, 1e308, -1e308, 1e-320, 0, -1, 1.5, 10**400]
)
_names = st.text(min_size=0, max_size=24)  # any code point: bidi, NUL, surrogates, NFD, …
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | _huge
    | _names
)
_json = st.recursive(
    _scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_names, kids, max_size=4),
    max_leaves=10,
)
#: Keys any route's body knows: request fields, endpoint settings, the arena's configuration.
_KEYS = sorted(
    {"k", "models", "outcome", "name", "role", "boost", "boost_until", "retired", "outage"}
    | {"prompt", "prompt_id", "key", "base_url", "model", "params", "price", "api_key_env"}
    | {"system_prompt", "stream", "stream_usage", "api_key"}
    | set(NUMERIC_BOUNDS)
    | set(ArenaConfig.model_fields)
)
_admin_values = st.dictionaries(st.sampled_from(_KEYS), _scalars | _json, max_size=4)
_bodies = st.one_of(
    _json.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    _admin_values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    _admin_values.map(
        lambda v: json.dumps({"base_url": "http://127.0.0.1:9/v1", "model": "m", **v}).encode()
    ),
    st.binary(max_size=64),
    _names.map(lambda s: s.encode("utf-8", "surrogatepass")),
)
_ctypes = st.sampled_from(
    [
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ]
)


def _routes(tc: TestClient) -> list[tuple[str, str]]:
    spec = tc.get("/openapi.json").json()
    out = [
        (method.upper(), path)
        for path, ops in spec["paths"].items()
        for method in ops
        if method.upper() in ("POST", "PUT", "PATCH", "DELETE")
    ]
    return sorted(out) + HIDDEN


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    db = tmp_path_factory.mktemp("fuzz-routes") / "arena.db"
    cfg = Settings.model_validate(
        {
            "db": f"sqlite:///{db}",
            "fit_in_process": False,
            "poll_seconds": 0.05,
            "seed": 0,
            "rate_limit": 1e6,
            "rate_burst": 1_000_000,
            "unauthenticated_rate_limit": 1e6,
            "unauthenticated_burst": 1_000_000,
            "arena": {"min_records": 0, "refit_votes": 1000, "refit_seconds": 1000.0},
        }
    )
    with TestClient(create_app(cfg)) as tc:
        akey = tc.app.state.admin_key
        admin = ArenaClient("http://testserver", akey, client=TestClient(tc.app), retries=0)
        for m in ("a", "b", "c"):
            admin.add_model(m)
        key = admin.create_annotator("fuzzer")
        battle = tc.post("/v1/battles", headers={"Authorization": f"Bearer {key}"}).json()
        stats = {"examples": 0, "routes": set(), "statuses": {}}
        start = time.monotonic()
        yield tc, key, akey, battle["battles"][0]["battle_id"], _routes(tc), stats
        took = time.monotonic() - start
        print(
            f"\nfuzzed {stats['examples']} requests on {len(stats['routes'])} routes in "
            f"{took:.1f} s; statuses {dict(sorted(stats['statuses'].items()))}"
        )


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    route=st.integers(0, 10_000),
    body=_bodies,
    ctype=_ctypes,
    who=st.sampled_from(["admin", "annotator", "nobody"]),
    name=st.one_of(st.sampled_from(["a", "b", "cafe\u0301", "x\u202ey", "zz"]), _names),
    real_battle=st.booleans(),
)
def test_every_routes_body_fuzzed_is_a_clear_answer_never_500_never_stuck(
    arena, route, body, ctype, who, name, real_battle
):
    tc, key, akey, battle, routes, stats = arena
    method, path = routes[route % len(routes)]
    if name.strip() in KEPT or not name:
        name = "zz"
    bid = battle if real_battle else quote(name, safe="") or "x"
    url = path.replace("{battle_id}", bid).replace("{name}", quote(name, safe=""))
    headers = {}
    if who != "nobody":
        headers["Authorization"] = f"Bearer {akey if who == 'admin' else key}"
    if ctype:
        headers["Content-Type"] = ctype
    r = tc.request(method, url, content=body, headers=headers)
    stats["examples"] += 1
    stats["routes"].add((method, path))
    stats["statuses"][r.status_code] = stats["statuses"].get(r.status_code, 0) + 1
    where = (method, url, body[:80], ctype, who)
    ok_503 = path == "/v1/admin/refit" and r.status_code == 503  # nothing to fit yet
    assert r.status_code < 500 or ok_503, (where, r.text[:300])
    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        assert "error" in r.json() or "detail" in r.json(), (where, r.text[:300])
    if r.status_code < 300 and method in ("POST", "PUT"):  # what was created is a valid name
        listed = tc.get("/v1/admin/models", headers={"Authorization": f"Bearer {akey}"})
        for m in listed.json()["models"]:
            assert clean_name(m["name"]) == m["name"], (where, m["name"])
    # never stuck: valid requests are served right after
    assert tc.get("/v1/models").status_code == 200
    r = tc.get("/v1/admin/config", headers={"Authorization": f"Bearer {akey}"})
    assert r.status_code == 200, r.text
    r = tc.post("/v1/battles", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code < 500, r.text


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    name=_names | st.sampled_from(["x\u202ey", "cafe\u0301", " a\u200b", "NA"]),
    route=st.integers(0, 2),
)
def test_every_create_route_takes_a_name_as_post_does(arena, name, route):
    """Any name sent to a route that creates something (a model by POST or by PUT of its
    endpoint, an annotator key) is either refused with 422 or stored in its clean form: the
    one validator, whatever the route (PUT used to store invisible and bidi names)."""
    tc, key, akey, battle, routes, stats = arena
    auth = {"Authorization": f"Bearer {akey}"}
    try:
        expected = clean_name(name)
    except ValueError:
        expected = None
    if expected in KEPT:
        return
    if route == 0:
        r = tc.post("/v1/admin/models", json={"name": name}, headers=auth)
    elif route == 1:
        endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
        r = tc.put(f"/v1/admin/models/{quote(name, safe='')}/endpoint", json=endpoint, headers=auth)
    else:
        r = tc.post("/v1/admin/annotators", json={"name": name}, headers=auth)
    if expected is None:
        assert r.status_code in (404, 405, 422), (
            name,
            r.status_code,
            r.text,
        )  # "" or "/": no route
        return
    assert r.status_code in (200, 201, 409), (name, r.text)
    if route < 2:
        names = [m["name"] for m in tc.get("/v1/admin/models", headers=auth).json()["models"]]
        assert expected in names and (name == expected or name not in names), (name, names)
