"""False changes of ``stablearena.judging.visible``: how often ordinary text, written by others and
hiding nothing, comes out changed, and by which rule.

Three corpora found on the machine (none written for this project):

1. **Package descriptions**: the paragraphs (>= 80 characters) of the descriptions of every
   Python package installed (README-like Markdown: prose, lists, code, badges; the corpus of
   ``bench_injection.py``'s false flags).
2. **Python docstrings**: the docstrings of the standard library's modules, classes and
   functions (read with ``ast`` from the sources: nothing is imported), split into paragraphs.
3. **Man pages**, rendered by ``man`` (groff) to text: up to ``--man-pages`` pages of each
   language directory under /usr/share/man (English, and the translations: Russian,
   Ukrainian, Serbian (Cyrillic), Chinese, Japanese, Korean, the Latin-script
   languages), split into paragraphs.

For each corpus: paragraphs, paragraphs changed, paragraphs changed per rule, hidden texts
found, examples of each rule's changes (the changed stretch before → after), and the time.

    python bench/bench_visible_text.py [--man-pages 60] [--examples 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def package_paragraphs() -> list[str]:
    from bench_injection import ordinary_paragraphs

    return ordinary_paragraphs()


def _split(text: str, min_len: int = 40) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if len(p.strip()) >= min_len]


def docstring_paragraphs() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts or "tests" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    out += _split(doc)
    return out


def man_paragraphs(per_language: int) -> dict[str, list[str]]:
    """Per language directory of /usr/share/man (``en``: the untranslated pages), the
    paragraphs of up to ``per_language`` pages rendered to text."""
    base = Path("/usr/share/man")
    if not base.is_dir():
        return {}
    langs: dict[str, list[Path]] = {}
    for sect in sorted(base.glob("man[1-8]")):
        langs.setdefault("en", []).extend(sorted(sect.glob("*.gz")))
    for lang in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("man")):
        langs[lang.name] = sorted(lang.rglob("*.gz"))
    env = {**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    out: dict[str, list[str]] = {}
    for lang, pages in langs.items():
        step = max(1, len(pages) // per_language)
        paras: list[str] = []
        for page in pages[::step][:per_language]:
            try:
                with gzip.open(page, "rb") as f:
                    if f.read(2) == b"..":  # .so links to another page
                        continue
                got = subprocess.run(
                    ["man", "-l", "-E", "UTF-8", "-P", "cat", str(page)],
                    capture_output=True,
                    env=env,
                    timeout=30,
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            text = got.stdout.decode("utf-8", errors="replace")
            # groff's overstrike bold/underline, if any: drop "x\bx" and "_\bx"
            while "\b" in text:
                k = text.index("\b")
                text = text[: max(k - 1, 0)] + text[k + 1 :]
            paras += [" ".join(p.split()) for p in _split(text)]
        out[lang] = paras
    return out


def _stretch(a: str, b: str, width: int = 30) -> str:
    """The part of ``a`` that differs from ``b``, with some context: ``before → after``."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    lo = max(0, p - width)
    return f"{a[lo : len(a) - s + 8]!r} → {b[lo : len(b) - s + 8]!r}"


def measure(paragraphs: list[str], examples: int) -> dict:
    from stablearena.judging.visible import RULES, visible

    per_rule: Counter[str] = Counter()
    shown: dict[str, list[str]] = {r: [] for r in RULES}
    hidden: Counter[str] = Counter()
    changed = 0
    t0 = time.perf_counter()
    for para in paragraphs:
        got = visible(para)
        hidden.update(h.kind for h in got.hidden)
        if got.text == para:
            continue
        changed += 1
        for rule in got.changes:
            per_rule[rule] += 1
            if len(shown[rule]) < examples:
                shown[rule].append(_stretch(para, got.text))
    elapsed = time.perf_counter() - t0
    chars = sum(map(len, paragraphs))
    return {
        "paragraphs": len(paragraphs),
        "characters": chars,
        "changed": changed,
        "changed_share": changed / max(len(paragraphs), 1),
        "paragraphs_changed_per_rule": dict(per_rule.most_common()),
        "hidden_found": dict(hidden),
        "examples": {r: v for r, v in shown.items() if v},
        "seconds": round(elapsed, 3),
        "us_per_1000_chars": round(1e6 * elapsed / max(chars / 1000, 1e-9), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--man-pages", type=int, default=60, help="pages per man language dir")
    ap.add_argument("--examples", type=int, default=4, help="examples shown per rule")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    corpora = {
        "package descriptions": package_paragraphs(),
        "python docstrings": docstring_paragraphs(),
    }
    for lang, paras in man_paragraphs(args.man_pages).items():
        corpora[f"man pages ({lang})"] = paras
    results = {name: measure(paras, args.examples) for name, paras in corpora.items()}
    total = Counter()
    rules = Counter()
    for r in results.values():
        total["paragraphs"] += r["paragraphs"]
        total["changed"] += r["changed"]
        rules.update(r["paragraphs_changed_per_rule"])
    print(f"{'corpus':32} {'paragraphs':>10} {'changed':>8}  per rule")
    for name, r in results.items():
        per = ", ".join(f"{k} {v}" for k, v in r["paragraphs_changed_per_rule"].items())
        print(f"{name:32} {r['paragraphs']:>10} {r['changed']:>8}  {per}")
    print(
        f"{'all':32} {total['paragraphs']:>10} {total['changed']:>8}  "
        + ", ".join(f"{k} {v}" for k, v in rules.most_common())
    )
    print("\nexamples (before → after):")
    for name, r in results.items():
        for rule, ex in r["examples"].items():
            for e in ex:
                print(f"  [{name}] {rule}: {e}")
    if args.json:
        Path(args.json).write_text(json.dumps({"corpora": results, "all": dict(total)}, indent=1))


if __name__ == "__main__":
    main()
