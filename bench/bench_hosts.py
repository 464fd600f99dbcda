"""Several hosts behind HAProxy on one PostgreSQL (docs/guides/several-hosts.md): throughput and
CPU per battle with 1, 2 and 3 ``serve`` hosts on this machine, and the latency HAProxy adds
beside direct calls.

For each number of hosts, tests/hosts.py's cluster (each host its own network namespace as
root, ``--workers 1``; the shipped deploy/ files) takes ``--seconds`` of load from this process:
``--page`` threads each holding page battles one after another (both answers streamed from the
demo model server with ``--slow`` s per word, then a vote) and ``--api`` threads each drawing an
API battle and voting. Reported: battles per second (page battles + API battles voted), and the
CPU seconds per battle of every process — the hosts (each ``serve`` and its fit process),
PostgreSQL (every backend), HAProxy, the demo model server — from /proc, so that the arena's CPU
per battle can be compared across host counts (it should not grow with the hosts). Then the
added latency: ``--calls`` sequential API battle + vote round trips, once to host 1 directly and
once through HAProxy, interleaved; medians and p90.

    nice -n 10 env PYTHONPATH=src:tests python bench/bench_hosts.py [--seconds 20] [--page 4] \
        [--api 4] [--slow 0.02] [--calls 200] [--hosts 1,2,3]

Where the hosts' CPU goes, per battle: each ``serve`` process's threads by name (serving —
the event loop and any unnamed thread —, the vote writer, the refitter that follows the other
hosts' votes and fits, the dashboard) and its child processes (fits, figures), and the writes
per group commit from each host's ``/metrics``. Then, after every phase of n > 1 hosts, a
**control**: one host alone under the load one host of that phase took (``--page``/n page
threads, the API threads paced to the phase's API battles per second per host) — so that the
CPU per battle of n hosts is compared with one host at the same load per host, which tells the
cost of following the other hosts apart from the cost of a lighter load per host (smaller
group commits, the fixed costs of a host spread over fewer battles). ``--no-control`` skips it.
Experiments on the rest: ``--api-rate`` paces every phase, ``--settings`` adds arena.toml
lines (e.g. ``'limits = "host"'``), ``--burners N`` runs N CPU-bound processes beside each
phase (does a busier machine raise the CPU per battle?), ``--refit-votes-per-host K`` sets
arena.refit_votes to K × the phase's hosts (every host installs every fit: with refit_votes
fixed, n hosts install n times as many fits per battle each), ``--control-api-threads share``
gives the control one host's share of the API threads (the concurrency a host of the phase saw)
instead of all of them, paced.

Needs root for the namespaces (else the hosts share 127.0.0.1), PostgreSQL and HAProxy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hosts import Cluster, Load, tmpdir  # noqa: E402
from procs import children  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def stat_cpu(stat: Path) -> float | None:
    """User + system CPU seconds in a /proc ``stat`` file (a process's or a thread's), or
    ``None`` when it is gone."""
    try:
        f = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(f[11]) + int(f[12])) / TICK


def cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    return stat_cpu(Path(f"/proc/{pid}/stat")) or 0.0


#: the service's named threads (stablearena._threads.name_this_thread), by /proc comm
THREADS = {"arena-writer": "writer", "arena-refitter": "refitter", "arena-dashboard": "dashboard"}


def task_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """(thread name, CPU seconds so far) of every thread of ``pid``."""
    out = {}
    for t in Path(f"/proc/{pid}/task").glob("*"):
        try:
            comm = (t / "comm").read_text().strip()
        except OSError:
            continue
        spent = stat_cpu(t / "stat")
        if spent is not None:
            out[int(t.name)] = (comm, spent)
    return out


def host_threads(c: Cluster, n: int) -> dict[str, dict[int, dict[int, tuple[str, float]]]]:
    """Per host: per process of its tree, its threads' CPU (the ``serve`` process first)."""
    return {
        f"host{h.k}": {p: task_cpu(p) for p in sorted(tree(h.pid), key=lambda p: p != h.pid)}
        for h in c.hosts[:n]
    }


def by_thread(before: dict, after: dict, hosts: list[int], battles: int) -> dict[str, float]:
    """CPU ms per battle of every host summed, by part: serving, writer, refitter, dashboard
    (threads of the ``serve`` process), children (its fit and figure processes)."""
    parts: dict[str, float] = {}
    for host, procs in after.items():
        serve = hosts[int(host.removeprefix("host")) - 1]
        for pid, tasks in procs.items():
            for tid, (comm, spent) in tasks.items():
                was = before.get(host, {}).get(pid, {}).get(tid, (comm, 0.0))[1]
                part = THREADS.get(comm, "serving") if pid == serve else "children"
                parts[part] = parts.get(part, 0.0) + spent - was
    return {k: round(1000 * v / max(battles, 1), 3) for k, v in sorted(parts.items())}


def commit_batch(c: Cluster, n: int) -> list[float]:
    """Mean writes per group commit of each host so far (its /metrics)."""
    out = []
    for h in c.hosts[:n]:
        text = httpx.get(
            h.url + "/metrics", headers={"Authorization": f"Bearer {c.admin_key}"}, timeout=15
        ).text
        got = dict(
            line.split(" ", 1)
            for line in text.splitlines()
            if line.startswith("stablearena_commit_batch_size_")
        )
        count = float(got.get("stablearena_commit_batch_size_count", 0))
        total = float(got.get("stablearena_commit_batch_size_sum", 0))
        out.append(round(total / count, 2) if count else 0.0)
    return out


def tree(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(children(p))
    return out


def groups(c: Cluster, n: int) -> dict[str, set[int]]:
    assert c.pg is not None and c.haproxy is not None and c.demo is not None
    postmaster = int((c.pg.data / "postmaster.pid").read_text().split()[0])
    out = {f"host{h.k}": tree(h.pid) for h in c.hosts[:n]}
    out["postgres"] = tree(postmaster)
    out["haproxy"] = tree(c.haproxy.pid)
    out["demo"] = {c.demo.pid}
    out["client"] = {os.getpid()}
    return out


def snapshot(g: dict[str, set[int]]) -> dict[str, float]:
    return {k: sum(cpu(p) for p in pids) for k, pids in g.items()}


def round_trip(client: httpx.Client, url: str) -> float:
    t0 = time.perf_counter()
    r = client.post(url + "/v1/battles", json={})
    r.raise_for_status()
    bid = r.json()["battles"][0]["battle_id"]
    client.post(f"{url}/v1/battles/{bid}/vote", json={"outcome": "tie"}).raise_for_status()
    return time.perf_counter() - t0


def run(
    n: int,
    args: argparse.Namespace,
    page_threads: int = -1,
    api_rate: float = 0.0,
    api_threads: int = -1,
) -> dict:
    """One phase: ``n`` hosts under the load (``page_threads``, default ``--page``;
    ``api_threads``, default ``--api``, paced to ``api_rate`` battles/s when given)."""
    page_threads = args.page if page_threads < 0 else page_threads
    api_threads = args.api if api_threads < 0 else api_threads
    api_rate = api_rate or getattr(args, "api_rate", 0.0)
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(getattr(args, "burners", 0))
    ]
    try:
        return _phase(n, args, page_threads, api_rate, api_threads)
    finally:
        for b in burners:
            b.kill()
            b.wait()


def _settings(n: int, args: argparse.Namespace) -> str:
    """The arena.toml lines every host of an ``n``-host phase gets: ``--settings``, and with
    ``--refit-votes-per-host K`` the arena's refit_votes at K × n (so that each host installs a
    fit per K of its own votes, whatever the number of hosts)."""
    text = getattr(args, "settings", "")
    per_host = getattr(args, "refit_votes_per_host", None)
    if per_host:
        text += f"\n[arena]\nrefit_votes = {per_host * n}\n"
    return text


def _phase(
    n: int, args: argparse.Namespace, page_threads: int, api_rate: float, api_threads: int
) -> dict:
    with Cluster(tmpdir(), n=n, slow=args.slow, settings=_settings(n, args)) as c:
        g = groups(c, n)
        load = Load(
            c.url, c.admin_key, page=page_threads, api=api_threads, api_rate=api_rate
        ).start()
        time.sleep(args.warmup)
        g = groups(c, n)  # the fit processes started by now
        serve_pids = [h.pid for h in c.hosts[:n]]
        b0, r0, cpu0, t0 = load.battles, load.requests, snapshot(g), time.monotonic()
        th0, batch0 = host_threads(c, n), commit_batch(c, n)
        acked0 = len(load.acked)
        time.sleep(args.seconds)
        cpu1, t1, th1 = snapshot(g), time.monotonic(), host_threads(c, n)
        page = load.battles - b0
        votes = len(load.acked) - acked0
        load.stop()
        api_battles = votes - page  # every page battle is voted once; the rest are API's
        battles = page + max(api_battles, 0)
        spent = {k: cpu1[k] - cpu0[k] for k in cpu0}
        arena = sum(v for k, v in spent.items() if k.startswith("host"))
        out = {
            "hosts": n,
            "control": False,
            "api_rate": api_rate,
            "burners": getattr(args, "burners", 0),
            "settings": _settings(n, args),
            "page_threads": page_threads,
            "api_threads": api_threads,
            "netns": c.netns,
            "seconds": round(t1 - t0, 2),
            "battles": battles,
            "page_battles": page,
            "requests": load.requests - r0,
            "battles_per_s": round(battles / (t1 - t0), 1),
            "failed": len(load.failed),
            "failure_kinds": sorted({f"{f[1]}: {f[2][:80]}" for f in load.failed}),
            "lost": len(load.lost(c)),
            "cpu_ms_per_battle": {
                k: round(1000 * v / max(battles, 1), 2) for k, v in spent.items()
            },
            "hosts_cpu_ms_per_battle": round(1000 * arena / max(battles, 1), 2),
            "server_side_cpu_ms_per_battle": round(
                1000 * (sum(spent.values()) - spent["client"]) / max(battles, 1), 2
            ),
            "hosts_cpu_ms_per_battle_by_part": by_thread(th0, th1, serve_pids, battles),
            "writes_per_commit": commit_batch(c, n),
            "writes_per_commit_at_start": batch0,
            "api_battles_per_s_per_host": round(max(api_battles, 0) / (t1 - t0) / n, 1),
        }
        if api_rate == 0 and (n == 1 or args.calls_every):
            key = httpx.post(
                c.url + "/v1/admin/annotators",
                json={"name": f"lat-{n}", "role": "annotator"},
                headers={"Authorization": f"Bearer {c.admin_key}"},
                timeout=30,
            ).json()["key"]
            cl = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {key}"})
            direct, proxied = [], []
            for _ in range(args.calls):
                direct.append(round_trip(cl, c.hosts[0].url))
                proxied.append(round_trip(cl, c.url))
            cl.close()

            def q(xs: list[float], p: float) -> float:
                return round(1000 * sorted(xs)[int(p * (len(xs) - 1))], 2)

            out["latency_ms"] = {
                "direct_p50": q(direct, 0.5),
                "haproxy_p50": q(proxied, 0.5),
                "direct_p90": q(direct, 0.9),
                "haproxy_p90": q(proxied, 0.9),
                "added_p50": round(
                    1000 * statistics.median(proxied) - 1000 * statistics.median(direct), 2
                ),
                "calls": args.calls,
            }
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--page", type=int, default=4)
    ap.add_argument("--api", type=int, default=4)
    ap.add_argument("--slow", type=float, default=0.02)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--calls-every", action="store_true", help="latency with every host count")
    ap.add_argument("--hosts", default="1,2,3")
    ap.add_argument(
        "--no-control", action="store_true", help="no one-host control after n > 1 hosts"
    )
    ap.add_argument(
        "--api-rate", type=float, default=0.0, help="pace the API threads (battles/s, all)"
    )
    ap.add_argument("--settings", default="", help="extra arena.toml lines for every host")
    ap.add_argument("--burners", type=int, default=0, help="CPU-bound processes beside each phase")
    ap.add_argument(
        "--control-api-threads",
        choices=("all", "share"),
        default="all",
        help="the control's API threads: all of --api (paced), or one host's share of them "
        "(the concurrency one host of the phase saw)",
    )
    ap.add_argument(
        "--refit-votes-per-host",
        type=int,
        default=None,
        help="arena.refit_votes = this × the phase's hosts (the control: × 1)",
    )
    args = ap.parse_args()
    print("load before:", Path("/proc/loadavg").read_text().strip(), flush=True)
    for n in [int(x) for x in args.hosts.split(",")]:
        phase = run(n, args)
        print(json.dumps(phase), flush=True)
        print("load:", Path("/proc/loadavg").read_text().strip(), flush=True)
        if n > 1 and not args.no_control:
            # one host under one host's share of that load
            rate = phase["api_battles_per_s_per_host"]
            share = args.control_api_threads == "share"
            control = run(
                1,
                args,
                page_threads=max(1, round(args.page / n)),
                api_rate=rate,
                api_threads=max(1, round(args.api / n)) if share else args.api,
            )
            control["control"] = True
            control["control_of"] = n
            control["ratio_to_phase"] = round(
                phase["hosts_cpu_ms_per_battle"] / max(control["hosts_cpu_ms_per_battle"], 1e-9),
                3,
            )
            print(json.dumps(control), flush=True)
            print("load:", Path("/proc/loadavg").read_text().strip(), flush=True)


if __name__ == "__main__":
    main()
