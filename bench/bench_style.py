"""Style control benchmark: stablearena's style-controlled m-ELO beside arena-rank, and the
acceptance experiments of issue 14.

Parts (``--part``, several allowed):

``agreement``  The same generated arena (``--agreement-battles``, default 100,000 battles, 50
    models, the four LMArena features with γ = (0.25, 0.024, 0.031, 0.019), ties) fitted by
    arena-rank's ``ContextualBradleyTerry`` (0.1.1, JAX, run through ``--arena-rank-python``
    because it pins numpy 2.3.3) and by ``StyleMElo``, at matched objectives: arena-rank
    minimises mean(−ℓ_battle) + (reg/2)‖γ‖² with features standardised by population std and no
    penalty on the ratings, which is our ``penalty="gamma"`` with λ = reg × battles. Both see
    the same raw normalised differences and standardise them. arena-rank is run to a tight
    optimum (ftol 0, gtol 1e-12) and at its defaults; the largest |Δ| of the Elo-scale ratings
    (400/ln10 per natural unit, mean 1000 on both sides) and of γ are printed.
``speed``  1,000,000 battles, same generator: ours (``Battles`` + ``StyleMElo(raw=False).fit``,
    exact Newton to ‖∇‖/n ≤ 1e-9) and arena-rank's ``fit`` (dataset construction timed apart and
    not counted), repeats interleaved (ours, theirs, ours, …), medians and ratio printed.
``recovery``  Acceptance 1: ``--reps`` (100) simulated arenas of 100,000 battles, 50 models,
    γ_length = 0.25: how often γ's 95% Fisher and sandwich intervals contain 0.25, and Kendall τ
    with the true ratings of the style-controlled and the uncontrolled (m-ELO) fit.
``am-elo``  Acceptance 3: arenas with a style effect and flipping annotators (100,000 battles,
    50 models, 200 annotators of whom 20% flip), style-controlled am-ELO beside plain am-ELO:
    flipper-detection AUC of the abilities and Kendall τ, over ``--am-reps`` seeds.
``tokens``  The offline token count (``\\w+|[^\\w\\s]``) against GPT-4o's ``o200k_base`` BPE
    (``bpe-openai``, whose vocabulary ships in its wheel) on the markdown package descriptions of
    the installed distributions: Pearson r of the counts, median ratio, and r of the normalised
    differences of random pairs.

Usage::

    python bench/bench_style.py --part agreement speed --arena-rank-python /tmp/arena-rank-venv/bin/python
    python bench/bench_style.py --part recovery am-elo
    python bench/bench_style.py --part tokens
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from stablearena.analysis.metrics import kendall_tau, prediction_auc
from stablearena.data.simulate import random_ratings
from stablearena.data.style_features import (
    normalized_difference,
    simulate_style_battles,
    with_covariates,
)
from stablearena.raters import AmElo
from stablearena.raters.style import StyleAmElo, StyleMElo

GAMMA4 = (0.25, 0.024, 0.031, 0.019)

#: Runs inside arena-rank's interpreter: reads the arena, answers "fit SETTING" lines with JSON.
PEER = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, pandas as pd
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset
    data = np.load(sys.argv[1], allow_pickle=True)
    names = data["models"]
    d = data["diff"].shape[1]
    cols = [f"f{k}" for k in range(d)]
    frame = pd.DataFrame({"model_a": names[data["a"]], "model_b": names[data["b"]],
                          "winner": np.array(["model_a", "model_b", "tie"])[data["outcome"]]})
    for k in range(d):
        frame[cols[k]] = data["diff"][:, k]
    t = time.perf_counter()
    ds = ContextualPairDataset.from_pandas(frame, cols, reweighted=False)
    t_ds = time.perf_counter() - t
    print(json.dumps({"ready": True, "dataset_seconds": t_ds}), flush=True)
    for line in sys.stdin:
        setting, reg = line.split()
        opts = {"ftol": 0.0, "gtol": 1e-12, "max_iter": 100000} if setting == "tight" else {}
        model = ContextualBradleyTerry(len(ds.competitors), d, reg=float(reg), **opts)
        t = time.perf_counter()
        model.fit(ds)
        r = np.asarray(model.params["ratings"]); g = np.asarray(model.params["coeffs"])
        secs = time.perf_counter() - t
        print(json.dumps({"seconds": secs, "competitors": list(ds.competitors),
                          "ratings": (r * model.alpha + model.init_rating).tolist(),
                          "coeffs": g.tolist()}), flush=True)
    """
)


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}


def arena(n: int, seed: int) -> tuple[Any, np.ndarray]:
    """The generated arena and its raw (unstandardised) normalised differences."""
    b = simulate_style_battles(random_ratings(50, seed=seed), n, gamma=GAMMA4, seed=seed, ties=True)
    diff = np.column_stack(
        [normalized_difference(b.extra[f"{f}_a"], b.extra[f"{f}_b"]) for f in b.covariate_names]
    )
    return with_covariates(b, diff, b.covariate_names), diff


class Peer:
    """arena-rank in its own interpreter, fed the same arena through a temporary .npz file."""

    def __init__(self, python: str, battles: Any, diff: np.ndarray) -> None:
        self.dir = tempfile.TemporaryDirectory()
        data = Path(self.dir.name) / "arena.npz"
        script = Path(self.dir.name) / "peer.py"
        np.savez(
            data,
            models=np.array(battles.models, dtype=object),
            a=battles.model_a,
            b=battles.model_b,
            outcome=np.minimum(battles.outcome, 2),
            diff=diff,
        )
        script.write_text(PEER)
        self.proc = subprocess.Popen(
            [python, str(script), str(data)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("arena-rank's interpreter ended without an answer")
        return json.loads(line)

    def fit(self, setting: str, reg: float) -> dict[str, Any]:
        self.proc.stdin.write(f"{setting} {reg!r}\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)
        self.dir.cleanup()


def ours(battles: Any, reg_mean: float) -> tuple[float, Any]:
    t = time.perf_counter()
    fitted = StyleMElo(raw=False, penalty="gamma", reg=reg_mean * len(battles)).fit(battles)
    return time.perf_counter() - t, fitted


def compare(fitted: Any, peer: dict[str, Any]) -> dict[str, float]:
    where = {n: k for k, n in enumerate(peer["competitors"])}
    theirs = np.array([peer["ratings"][where[n]] for n in fitted.models])
    mine = np.asarray(fitted.ratings)
    return {
        "max_rating_diff": float(np.max(np.abs((mine - mine.mean()) - (theirs - theirs.mean())))),
        "max_gamma_diff": float(np.max(np.abs(fitted.gamma - np.array(peer["coeffs"])))),
    }


def part_agreement(python: str, n: int, regs: list[float]) -> dict[str, Any]:
    battles, diff = arena(n, seed=11)
    peer = Peer(python, battles, diff)
    out: dict[str, Any] = {"battles": n, "runs": []}
    try:
        for reg in regs:
            _, fitted = ours(battles, reg)
            for setting in ("tight", "default"):
                res = peer.fit(setting, reg)
                out["runs"].append(
                    {
                        "reg": reg,
                        "arena_rank": setting,
                        **compare(fitted, res),
                        "gamma": fitted.gamma.tolist(),
                    }
                )
    finally:
        peer.close()
    return out


def part_speed(python: str | None, n: int, repeats: int, reg: float) -> dict[str, Any]:
    battles, diff = arena(n, seed=12)
    peer = Peer(python, battles, diff) if python else None
    ours(battles, reg)  # warm-up (compilation cache)
    t_ours, t_default, t_tight = [], [], []
    try:
        if peer is not None:
            peer.fit("default", reg)  # warm-up (JAX start-up)
        for _ in range(repeats):
            t, fitted = ours(battles, reg)
            t_ours.append(t)
            if peer is not None:
                t_default.append(peer.fit("default", reg)["seconds"])
                t, _ = ours(battles, reg)
                t_ours.append(t)
                res = peer.fit("tight", reg)
                t_tight.append(res["seconds"])
    finally:
        if peer is not None:
            peer.close()
    out: dict[str, Any] = {
        "battles": n,
        "rows_after_aggregation": len(fitted.rows),
        "ours_seconds": statistics.median(t_ours),
        "ours_all": t_ours,
        "ours_iterations": fitted.convergence.iterations,
        "ours_grad_norm": fitted.convergence.grad_norm,
    }
    if peer is not None:
        out |= {
            "arena_rank_dataset_seconds": peer.ready["dataset_seconds"],
            "arena_rank_default_seconds": statistics.median(t_default),
            "arena_rank_tight_seconds": statistics.median(t_tight),
            "ratio_default": statistics.median(t_default) / statistics.median(t_ours),
            "ratio_tight": statistics.median(t_tight) / statistics.median(t_ours),
            **compare(fitted, res),
        }
    return out


def part_recovery(reps: int, n: int) -> dict[str, Any]:
    truth = random_ratings(50, seed=2024)
    cover_f = cover_s = better = 0
    tau_style, tau_raw, gammas = [], [], []
    for rep in range(reps):
        b = simulate_style_battles(truth, n, gamma=(0.25,), seed=10_000 + rep)
        fitted = StyleMElo().fit(b)
        row = fitted.style_table().iloc[0]
        cover_f += row.ci_low_fisher <= 0.25 <= row.ci_high_fisher
        cover_s += row.ci_low_sandwich <= 0.25 <= row.ci_high_sandwich
        ts, tr = kendall_tau(fitted.ratings, truth), kendall_tau(fitted.raw.ratings, truth)
        tau_style.append(ts)
        tau_raw.append(tr)
        better += ts > tr
        gammas.append(float(fitted.gamma[0]))
    return {
        "reps": reps,
        "battles": n,
        "coverage_fisher": cover_f / reps,
        "coverage_sandwich": cover_s / reps,
        "gamma_mean": float(np.mean(gammas)),
        "gamma_sd": float(np.std(gammas, ddof=1)),
        "tau_style_mean": float(np.mean(tau_style)),
        "tau_raw_mean": float(np.mean(tau_raw)),
        "reps_style_better": int(better),
        "reps_tied": int(np.sum(np.isclose(tau_style, tau_raw))),
    }


def part_am_elo(reps: int, n: int) -> dict[str, Any]:
    rows = []
    for rep in range(reps):
        rng = np.random.default_rng(500 + rep)
        ab = np.concatenate([rng.uniform(0.5, 1.5, 160), -rng.uniform(0.5, 1.5, 40)])
        truth = random_ratings(50, seed=600 + rep)
        b = simulate_style_battles(truth, n, gamma=(0.25,), abilities=ab, seed=700 + rep)
        flip = (ab < 0).astype(float)
        t = time.perf_counter()
        styled = StyleAmElo(raw=False).fit(b)
        t_styled = time.perf_counter() - t
        plain = AmElo().fit(b)
        rows.append(
            {
                "auc_style_am_elo": prediction_auc(-styled.abilities, flip),
                "auc_am_elo": prediction_auc(-plain.abilities, flip),
                "tau_style_am_elo": kendall_tau(styled.ratings, truth),
                "tau_am_elo": kendall_tau(plain.ratings, truth),
                "gamma": float(styled.gamma[0]),
                "style_am_elo_seconds": t_styled,
                "converged": styled.convergence.converged,
            }
        )
    keys = rows[0].keys()
    return {"reps": reps, "battles": n, "runs": rows} | {
        f"mean_{k}": float(np.mean([r[k] for r in rows])) for k in keys if k != "converged"
    }


def _markdown_corpus(limit: int) -> list[str]:
    """Markdown-ish text on this machine: the package descriptions of the installed
    distributions, then Markdown files under site-packages and /usr/share/doc (gzipped too)."""
    import gzip
    import site
    from importlib import metadata

    texts = []
    for dist in metadata.distributions():
        body = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else None
        body = body or dist.metadata.get("Description") or ""
        if 200 < len(body) < 200_000:
            texts.append(body)
    roots = [Path(p) for p in site.getsitepackages()] + [Path("/usr/share/doc")]
    for root in roots:
        for path in sorted(root.rglob("*.md*")) if root.exists() else []:
            if path.suffix not in (".md", ".gz") or len(texts) >= limit:
                continue
            try:
                raw = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
            except (OSError, UnicodeDecodeError, EOFError):
                continue
            if 200 < len(raw) < 200_000:
                texts.append(raw)
    return texts[:limit]


def part_tokens(limit: int, bpe_path: str | None) -> dict[str, Any]:
    if bpe_path:
        sys.path.insert(0, bpe_path)
    try:
        import bpe_openai
    except ImportError:
        return {
            "skipped": "bpe-openai is not installed (pip install bpe-openai, or --bpe-path DIR)"
        }
    from stablearena.data.style_features import count_tokens

    enc = bpe_openai.get_encoding("o200k_base")
    texts = _markdown_corpus(limit)
    ours_n = np.array([count_tokens(t) for t in texts], dtype=float)
    bpe_n = np.array([len(enc.encode(t)) for t in texts], dtype=float)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, len(texts), (2, 20_000))
    keep = i != j
    d_ours = normalized_difference(ours_n[i[keep]], ours_n[j[keep]])
    d_bpe = normalized_difference(bpe_n[i[keep]], bpe_n[j[keep]])
    return {
        "documents": len(texts),
        "pearson_counts": float(np.corrcoef(ours_n, bpe_n)[0, 1]),
        "pearson_log_counts": float(np.corrcoef(np.log1p(ours_n), np.log1p(bpe_n))[0, 1]),
        "median_ratio_bpe_over_ours": float(np.median(bpe_n / np.maximum(ours_n, 1))),
        "pearson_normalised_differences": float(np.corrcoef(d_ours, d_bpe)[0, 1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part",
        nargs="+",
        choices=["agreement", "speed", "recovery", "am-elo", "tokens"],
        default=["agreement", "speed"],
    )
    parser.add_argument(
        "--arena-rank-python", default=None, help="interpreter with arena-rank installed"
    )
    parser.add_argument("--agreement-battles", type=int, default=100_000)
    parser.add_argument("--regs", type=float, nargs="+", default=[1e-4, 1.0],
                        help="arena-rank reg values to match (its default is 1.0)")  # fmt: skip
    parser.add_argument("--speed-battles", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--recovery-battles", type=int, default=100_000)
    parser.add_argument("--am-reps", type=int, default=5)
    parser.add_argument("--tokens-docs", type=int, default=2000)
    parser.add_argument("--bpe-path", default=None, help="extra sys.path entry holding bpe_openai")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results: dict[str, Any] = {"machine": machine()}
    print(f"machine: {results['machine']}", flush=True)
    needs_peer = {"agreement", "speed"} & set(args.part)
    if needs_peer and args.arena_rank_python is None:
        print("no --arena-rank-python: arena-rank is skipped (python -m venv /tmp/arena-rank-venv && "
              "/tmp/arena-rank-venv/bin/pip install arena-rank)")  # fmt: skip
    if "agreement" in args.part and args.arena_rank_python:
        r = part_agreement(args.arena_rank_python, args.agreement_battles, args.regs)
        results["agreement"] = r
        print(f"\nagreement on {r['battles']:,} battles, 50 models, 4 features (ties as half):")
        for run in r["runs"]:
            print(
                f"  arena-rank reg {run['reg']:g} ({run['arena_rank']}): max |Δ rating| "
                f"{run['max_rating_diff']:.2e} Elo points, max |Δ γ| {run['max_gamma_diff']:.2e}; "
                f"γ = {np.round(run['gamma'], 5).tolist()}"
            )
    if "speed" in args.part:
        r = part_speed(args.arena_rank_python, args.speed_battles, args.repeats, args.regs[0])
        results["speed"] = r
        print(
            f"\nspeed on {r['battles']:,} battles ({r['rows_after_aggregation']:,} rows), reg {args.regs[0]:g}:"
        )
        print(
            f"  stablearena style-m-elo {r['ours_seconds']:.3f} s (median of {len(r['ours_all'])}), "
            f"{r['ours_iterations']} Newton iterations, |g|/n {r['ours_grad_norm']:.1e}"
        )
        if "ratio_default" in r:
            print(
                f"  arena-rank fit {r['arena_rank_default_seconds']:.3f} s at its defaults, "
                f"{r['arena_rank_tight_seconds']:.3f} s to a tight optimum (+{r['arena_rank_dataset_seconds']:.2f} s "
                "building its dataset, not counted)"
            )
            print(
                f"  ratio arena-rank / ours: {r['ratio_default']:.1f}x (defaults), {r['ratio_tight']:.1f}x (tight); "
                f"agreement at tight: {r['max_rating_diff']:.1e} Elo, {r['max_gamma_diff']:.1e} γ"
            )
    if "recovery" in args.part:
        r = part_recovery(args.reps, args.recovery_battles)
        results["recovery"] = r
        print(
            f"\nrecovery: {r['reps']} arenas of {r['battles']:,} battles, 50 models, γ_length = 0.25"
        )
        print(
            f"  95% interval covers 0.25: Fisher {r['coverage_fisher']:.0%}, sandwich {r['coverage_sandwich']:.0%}; "
            f"γ̂ mean {r['gamma_mean']:.4f} (sd {r['gamma_sd']:.4f})"
        )
        print(
            f"  Kendall τ with the truth: style-controlled {r['tau_style_mean']:.4f}, uncontrolled "
            f"{r['tau_raw_mean']:.4f}; style-controlled higher in {r['reps_style_better']} of {r['reps']} "
            f"(equal in {r['reps_tied']})"
        )
    if "am-elo" in args.part:
        r = part_am_elo(args.am_reps, 100_000)
        results["am_elo"] = r
        print(
            f"\nam-ELO with a style effect: {r['reps']} arenas of 100,000 battles, 200 annotators (40 flip)"
        )
        print(
            f"  flipper AUC: style-am-elo {r['mean_auc_style_am_elo']:.4f}, am-elo {r['mean_auc_am_elo']:.4f}; "
            f"Kendall τ: style-am-elo {r['mean_tau_style_am_elo']:.4f}, am-elo {r['mean_tau_am_elo']:.4f}; "
            f"γ̂ {r['mean_gamma']:.4f}; {r['mean_style_am_elo_seconds']:.2f} s per fit"
        )
    if "tokens" in args.part:
        r = part_tokens(args.tokens_docs, args.bpe_path)
        results["tokens"] = r
        if "skipped" in r:
            print(f"\ntokens: skipped — {r['skipped']}")
        else:
            print(
                f"\ntokens on {r['documents']} markdown documents: Pearson r (counts) {r['pearson_counts']:.4f}, "
                f"(log counts) {r['pearson_log_counts']:.4f}; median o200k/ours {r['median_ratio_bpe_over_ours']:.3f}; "
                f"r of normalised differences {r['pearson_normalised_differences']:.4f}"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2, default=float)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
