"""Install size and time of the core and of the ``serve`` extra (README, "Two commands"): a
fresh venv per variant, ``pip install --no-cache-dir`` of this checkout, wall and CPU time of
the install, the number of installed packages and the size of site-packages. Needs the package
registry; slow on a slow network (each install is one try, minutes at most).

    python bench/bench_install.py [--extras ,serve]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extras", default=",serve", help="comma-separated; '' is the core")
    args = ap.parse_args()
    for extra in args.extras.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            venv = Path(tmp) / "v"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip = venv / "bin" / "pip"
            target = f"{ROOT}[{extra}]" if extra else str(ROOT)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([str(pip), "install", "-q", "--no-cache-dir", target], check=True)
            wall = time.perf_counter() - t0
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
            listed = subprocess.run(
                [str(pip), "list", "--format", "freeze"], capture_output=True, text=True
            ).stdout.splitlines()
            site = next((venv / "lib").glob("python*/site-packages"))
            print(
                f"{extra or 'core'}: {len(listed)} packages, {_size(site) / 2**20:,.0f} MiB, "
                f"install {wall:.0f} s wall, {cpu:.0f} s CPU",
                flush=True,
            )


if __name__ == "__main__":
    main()
