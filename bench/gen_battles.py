"""Write a large simulated battle log as a directory of Parquet files (for bench_stream.py).

Battles of ``--models`` models with known Elo-scale ratings (normal, sd 200), pairs uniform at
random, outcomes from the ties-as-half "paper" rule (W = 1 with p², 0 with (1 − p)², a tie with
2p(1 − p)), written ``--rows-per-file`` rows per file in row groups of 1,000,000, model names and
outcome labels dictionary-encoded (as Arrow and Spark write them). Memory stays at one row group
(about 50 MB) whatever ``--battles`` is. The files are deterministic for a given seed.

Usage::

    python bench/gen_battles.py /tmp/battles-100m --battles 100_000_000
    python bench/gen_battles.py /tmp/battles-1m --battles 1_000_000 --files 4
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LABELS = pa.array(["model_a", "model_b", "tie"], pa.string())


def model_names(m: int) -> pa.Array:
    return pa.array([f"model-{k:04d}" for k in range(m)], pa.string())


def true_ratings(m: int, seed: int) -> np.ndarray:
    return 1000.0 + 200.0 * np.random.default_rng(seed).standard_normal(m)


def battle_chunk(rng: np.random.Generator, ratings: np.ndarray, n: int) -> pa.Table:
    """``n`` battles as a table with dictionary-encoded model_a, model_b and winner."""
    m = len(ratings)
    a = rng.integers(0, m, n, dtype=np.int32)
    b = (a + rng.integers(1, m, n, dtype=np.int32)) % m
    p = 1.0 / (1.0 + 10.0 ** ((ratings[b] - ratings[a]) / 400.0))
    u = rng.random(n)
    outcome = np.where(u < p * p, 0, np.where(u < p * p + (1 - p) ** 2, 1, 2)).astype(np.int8)
    names = model_names(m)
    return pa.table(
        {
            "model_a": pa.DictionaryArray.from_arrays(pa.array(a), names),
            "model_b": pa.DictionaryArray.from_arrays(pa.array(b), names),
            "winner": pa.DictionaryArray.from_arrays(pa.array(outcome), LABELS),
        }
    )


def write_log(
    out: Path,
    battles: int,
    *,
    models: int = 200,
    rows_per_file: int = 10_000_000,
    seed: int = 0,
    row_group: int = 1_000_000,
) -> list[Path]:
    """Write the log; returns the files written (``part-00000.parquet``, …)."""
    out.mkdir(parents=True, exist_ok=True)
    ratings = true_ratings(models, seed)
    rng = np.random.default_rng(seed + 1)
    files = []
    left = battles
    k = 0
    while left > 0:
        path = out / f"part-{k:05d}.parquet"
        rows = min(rows_per_file, left)
        writer = None
        try:
            done = 0
            while done < rows:
                chunk = battle_chunk(rng, ratings, min(row_group, rows - done))
                if writer is None:
                    writer = pq.ParquetWriter(path, chunk.schema, compression="snappy")
                writer.write_table(chunk, row_group_size=row_group)
                done += chunk.num_rows
        finally:
            if writer is not None:
                writer.close()
        files.append(path)
        left -= rows
        k += 1
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="directory to write (created)")
    ap.add_argument("--battles", type=int, default=100_000_000)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--rows-per-file", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, help="split into this many files instead")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    per_file = args.rows_per_file
    if args.files:
        per_file = -(-args.battles // args.files)
    t0 = time.perf_counter()
    files = write_log(
        args.out, args.battles, models=args.models, rows_per_file=per_file, seed=args.seed
    )
    size = sum(f.stat().st_size for f in files)
    print(
        f"wrote {args.battles:,} battles of {args.models} models to {len(files)} files in "
        f"{args.out} ({size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
