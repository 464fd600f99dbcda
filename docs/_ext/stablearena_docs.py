"""Sphinx extension: the generated pages of the stablearena documentation.

A page that holds a MyST comment line ``% stablearena:generate NAME`` gets that line replaced,
when Sphinx reads it, by Markdown generated from the code:

* ``cli`` — every ``stablearena`` command, from the Typer app (:data:`stablearena.cli.app`):
  usage, help text, and a table of its arguments and options exactly as ``--help`` words
  them;
* ``http-api`` — every path and method of the live arena's HTTP API, from the OpenAPI schema
  of :func:`stablearena.service.app.create_app`: parameters, request body, responses and the
  schemas they use;
* ``python-api`` — the public names of ``import stablearena``, each linked to its
  documentation in the module pages.

Generated text is escaped Markdown: nothing in a help string or a schema description can turn
into markup (or a warning of the docs build).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

MARKER = re.compile(r"^% stablearena:generate ([\w-]+)[ \t]*$", re.MULTILINE)

# ASCII punctuation that can start Markdown/MyST syntax; CommonMark lets any of it be escaped
_SPECIAL = re.compile(r"([\\`*_\[\]{}<>()#+!|~$&^:=-])")


def escape(text: str) -> str:
    """``text`` as literal Markdown inline text (one line: newlines become spaces)."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def code(text: str) -> str:
    """``text`` as one inline code span (backticks inside are fenced by longer runs)."""
    text = " ".join(str(text).split())
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def paragraphs(text: str | None) -> list[str]:
    """A help text's paragraphs (blank-line separated; click's ``\\b`` markers dropped), each
    escaped and joined into one line."""
    if not text:
        return []
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [ln for ln in block.splitlines() if ln.strip() != "\b"]
        if lines:
            out.append(escape(" ".join(lines)))
    return out


_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    """A Markdown (GFM) table of already formatted cells."""
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join(_UNESCAPED_PIPE.sub(r"\\|", cell) for cell in row) + " |")
    return lines


# ------------------------------------------------------------------------------- the CLI
def _commands(command: Any, ctx: Any) -> Iterable[tuple[Any, Any]]:
    """(command, context) for ``command`` and every command below it, depth first."""
    yield command, ctx
    lister = getattr(command, "list_commands", None)
    if lister is None:
        return
    for name in lister(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or getattr(sub, "hidden", False):
            continue
        yield from _commands(sub, sub.context_class(sub, info_name=name, parent=ctx))


def cli_markdown() -> str:
    """The CLI reference: one section per command of the ``stablearena`` Typer app."""
    import typer.main

    from stablearena.cli import app

    root = typer.main.get_command(app)
    root_ctx = root.context_class(root, info_name="stablearena")
    out: list[str] = []
    for command, ctx in _commands(root, root_ctx):
        path = ctx.command_path
        depth = min(2 + path.count(" "), 4) if command is not root else 2
        out += ["#" * depth + " " + code(path), ""]
        out += ["```text", command.get_usage(ctx).strip(), "```", ""]
        for para in paragraphs(command.help):
            out += [para, ""]
        records = []
        for param in command.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            name, help_text = record
            kind = "argument" if getattr(param, "param_type_name", "") == "argument" else "option"
            records.append((code(name), kind, escape(help_text or "")))
        if records:
            out += table(["name", "kind", "description"], records) + [""]
        sub_names = getattr(command, "list_commands", lambda c: [])(ctx)
        if sub_names:
            subs = ", ".join(code(f"{path} {n}") for n in sub_names)
            out += [f"Commands: {subs}.", ""]
    return "\n".join(out)


# -------------------------------------------------------------------------- the HTTP API
def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    """The anchor MyST gives the heading ``Schema `NAME```."""
    return "schema-" + re.sub(r"[^\w\- ]", "", name.lower()).strip().replace(" ", "-")


def schema_type(schema: Any) -> str:
    """A one-line Markdown description of a JSON schema's type."""
    if not isinstance(schema, dict) or not schema:
        return "any"
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{escape(name)}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            sep = " and " if key == "allOf" else " or "
            return sep.join(schema_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(escape(k) for k in kind)
    if kind == "array":
        return "array of " + schema_type(schema.get("items", {}))
    if "enum" in schema:
        values = ", ".join(code(json.dumps(v)) for v in schema["enum"])
        return f"{escape(kind)} (one of {values})"
    if kind == "object" and "additionalProperties" in schema and not schema.get("properties"):
        extra = schema["additionalProperties"]
        return "object" if extra is True else "object of " + schema_type(extra)
    return escape(kind)


_LIMITS = (
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
    ("minLength", "length ≥"),
    ("maxLength", "length ≤"),
    ("minItems", "items ≥"),
    ("maxItems", "items ≤"),
    ("pattern", "matches"),
)


def schema_notes(schema: Any) -> str:
    """Default and limits of a schema, as Markdown (empty when it has none)."""
    if not isinstance(schema, dict):
        return ""
    notes = []
    if "default" in schema:
        notes.append("default " + code(json.dumps(schema["default"])))
    for key, word in _LIMITS:
        if key in schema:
            value = schema[key]
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            shown = code(value) if key == "pattern" else code(json.dumps(value))
            notes.append(f"{word} {shown}")
    for part in schema.get("anyOf", []):  # Optional[...] keeps its limits in the non-null part
        if isinstance(part, dict) and part.get("type") != "null":
            inner = schema_notes({k: v for k, v in part.items() if k != "default"})
            if inner:
                notes.append(inner)
    return "; ".join(notes)


def markdown_inline(text: str) -> str:
    """An OpenAPI description (CommonMark by the OpenAPI rules) as one line of Markdown: outside
    code spans, raw HTML and MyST roles are escaped; the rest is kept."""
    parts = re.split(r"(`+.*?`+)", " ".join(str(text).split()))
    return "".join(
        part if part.startswith("`") else re.sub(r"([<>{}])", r"\\\1", part) for part in parts
    )


def _description(*sources: Any) -> str:
    for source in sources:
        if isinstance(source, dict):
            text = source.get("description") or source.get("title")
            if text:
                return markdown_inline(text).rstrip(".")
    return ""


def properties_table(schema: dict) -> list[str]:
    """A table of an object schema's properties."""
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        text = _description(prop)
        notes = schema_notes(prop)
        rows.append(
            (
                code(name),
                schema_type(prop),
                "yes" if name in required else "no",
                "; ".join(p for p in (text, notes) if p),
            )
        )
    return table(["field", "type", "required", "description"], rows)


def _body(schema: Any) -> list[str]:
    """Markdown for a request or response body schema."""
    if isinstance(schema, dict) and schema.get("properties"):
        return properties_table(schema)
    return [f"Type: {schema_type(schema)}."]


def resolve(spec: dict, obj: Any) -> Any:
    """``obj``, or what its local ``$ref`` (``#/components/...``) points to."""
    seen = 0
    while isinstance(obj, dict) and isinstance(obj.get("$ref"), str) and seen < 20:
        ref = obj["$ref"]
        if not ref.startswith("#/"):
            break
        target: Any = spec
        for key in ref[2:].split("/"):
            target = target.get(key, {}) if isinstance(target, dict) else {}
        obj, seen = target, seen + 1
    return obj


def http_markdown() -> str:
    """The HTTP API reference: one section per path and method of the OpenAPI schema."""
    from stablearena.service.app import create_app

    spec = create_app().openapi()
    out: list[str] = []
    info = spec.get("info", {})
    out += [
        f"OpenAPI {escape(spec.get('openapi', ''))}; {escape(info.get('title', ''))}, "
        f"version {escape(info.get('version', ''))}.",
        "",
    ]
    for para in re.split(r"\n\s*\n", (info.get("description") or "").strip()):
        if para:
            out += [markdown_inline(para), ""]
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            if not isinstance(op, dict) or method.startswith("x-"):
                continue
            out += [f"## {code(method.upper() + ' ' + path)}", ""]
            for text in (op.get("summary"), op.get("description")):
                for para in re.split(r"\n\s*\n", (text or "").strip()):
                    if para:
                        out += [markdown_inline(para), ""]
            params = [resolve(spec, p) for p in op.get("parameters", [])]
            if params:
                rows = []
                for p in params:
                    schema = p.get("schema", {})
                    text = _description(p, schema)
                    notes = schema_notes(schema)
                    rows.append(
                        (
                            code(p.get("name", "")),
                            escape(p.get("in", "")),
                            schema_type(schema),
                            "yes" if p.get("required") else "no",
                            "; ".join(x for x in (text, notes) if x),
                        )
                    )
                out += ["**Parameters**", ""]
                out += table(["name", "in", "type", "required", "description"], rows) + [""]
            body = resolve(spec, op.get("requestBody"))
            if isinstance(body, dict):
                for media, content in body.get("content", {}).items():
                    needed = "required" if body.get("required") else "optional"
                    out += [f"**Request body** ({code(media)}, {needed})", ""]
                    out += _body(content.get("schema", {})) + [""]
            responses = op.get("responses", {})
            if responses:
                rows = []
                for status, resp in responses.items():
                    resp = resolve(spec, resp)
                    media = ", ".join(
                        f"{code(m)}: {schema_type(c.get('schema', {}))}"
                        for m, c in resp.get("content", {}).items()
                    )
                    rows.append((code(status), escape(resp.get("description", "")), media))
                out += ["**Responses**", ""]
                out += table(["status", "description", "content"], rows) + [""]
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", ""]
        for name, schema in schemas.items():
            out += [f"### Schema {code(name)}", ""]
            if schema.get("description"):
                out += paragraphs(schema["description"]) + [""]
            out += _body(schema) + [""]
    return "\n".join(out)


# ------------------------------------------------------------------------ the Python API
def python_markdown() -> str:
    """An autosummary table of the names ``import stablearena`` offers, each linked to its
    documentation in the page of the module that defines it."""
    import stablearena

    lines = ["```{eval-rst}", ".. autosummary::", "   :nosignatures:", ""]
    for name in stablearena.__all__:
        module = "stablearena" + stablearena._LAZY[name]
        lines.append(f"   ~{module}.{name}")
    return "\n".join([*lines, "```"])


# -------------------------------------------------------------------------- docstrings
_LITERAL_OR_ROLE = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]*`|`[^`]*`_?)")


def escape_bars(line: str) -> str:
    """A docstring line with each ``|`` outside literals and roles escaped: the docstrings write
    absolute values as ``|x|``, which reST would read as a substitution reference. Lines of a
    grid table (starting and ending with ``|`` or ``+``) are left alone."""
    stripped = line.strip()
    if stripped[:1] in "|+" and stripped[-1:] in "|+" and len(stripped) > 1:
        return line
    parts = _LITERAL_OR_ROLE.split(line)
    return "".join(part if i % 2 else part.replace("|", "\\|") for i, part in enumerate(parts))


def _process_docstring(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    literal = None  # indentation of the paragraph that opened a literal block (::)
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal is not None and line.strip() and indent <= literal:
            literal = None
        if literal is None:
            lines[i] = escape_bars(line)
            if line.rstrip().endswith("::"):
                literal = indent


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_markdown,
    "http-api": http_markdown,
    "python-api": python_markdown,
}


_TOCTREE = re.compile(r"^(```+)\{toctree\}[^\n]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_GLOB_CHARS = re.compile(r"[*?\[]")


def drop_empty_globs(text: str, docname: str, found: set[str]) -> str:
    """``text`` with the glob entries of its ``:glob:`` toctrees that match no page (besides the
    pages listed by name above them) removed.

    Pages written separately (a guide, the data sets page) join the site through glob entries
    (``guides/*``, ``datasets*``); until they exist the entry is simply absent instead of a
    warning (Sphinx's "didn't match any documents" warning has no type that
    ``suppress_warnings`` could name)."""
    from sphinx.util import docname_join
    from sphinx.util.matching import patfilter

    def fix(match: re.Match[str]) -> str:
        body = match.group(2)
        if not re.search(r"^:glob:", body, re.MULTILINE):
            return match.group(0)
        kept, listed = [], set()
        for line in body.splitlines(keepends=True):
            entry = line.strip()
            if entry and not entry.startswith(":"):
                if not _GLOB_CHARS.search(entry):
                    listed.add(docname_join(docname, entry))
                elif not set(patfilter(found, docname_join(docname, entry))) - listed:
                    continue  # matches nothing, or only pages listed above it
            kept.append(line)
        return match.group(0).replace(body, "".join(kept), 1)

    return _TOCTREE.sub(fix, text)


def _source_read(app: Any, docname: str, source: list[str]) -> None:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(
                f"{docname}: unknown generated section {name!r}; one of {sorted(GENERATORS)}"
            )
        return GENERATORS[name]()

    source[0] = MARKER.sub(replace, source[0])
    source[0] = drop_empty_globs(source[0], docname, set(app.env.found_docs))


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _source_read)
    app.connect("autodoc-process-docstring", _process_docstring)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
