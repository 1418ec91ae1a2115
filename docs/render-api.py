#!/usr/bin/env python3
"""Renders the agent's OpenAPI document (docs/openapi.json) as Markdown for people (docs/API.md).

    python3 docs/render-api.py docs/openapi.json > docs/API.md      (what `make docs` runs)

Standard library only. tests/integration/test_agent.sh renders what a running agent serves and
fails when docs/API.md differs, so the page cannot drift from the API.
"""
import json
import sys

METHODS = ["get", "put", "post", "patch", "delete"]


def cell(text):
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def schema_name(s):
    ref = s.get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref else ""


def type_of(s):
    """A short type for a schema: `Lun`, `array of Lun`, `string`, `integer`, ..."""
    if not s:
        return ""
    name = schema_name(s)
    if name:
        return "[%s](#%s)" % (name, name.lower())
    t = s.get("type", "")
    if t == "array":
        return "array of " + type_of(s.get("items", {}))
    if "oneOf" in s or "anyOf" in s:
        return " or ".join(type_of(x) for x in s.get("oneOf", s.get("anyOf", [])))
    return t or "any"


def constraints(s):
    out = []
    if "enum" in s:
        out.append("one of " + ", ".join("`%s`" % v for v in s["enum"]))
    if "minimum" in s or "maximum" in s:
        out.append("%s..%s" % (s.get("minimum", ""), s.get("maximum", "")))
    if "minLength" in s or "maxLength" in s:
        out.append("%s..%s chars" % (s.get("minLength", 0), s.get("maxLength", "")))
    if "pattern" in s:
        out.append("pattern `%s`" % s["pattern"])
    if s.get("readOnly"):
        out.append("read-only")
    if s.get("writeOnly"):
        out.append("write-only")
    return "; ".join(out)


def content_schema(obj):
    for media in (obj or {}).get("content", {}).values():
        return media.get("schema", {})
    return {}


def render(doc):
    lines = []
    info = doc.get("info", {})
    lines += [
        "# REST API reference",
        "",
        "<!-- Generated from docs/openapi.json by docs/render-api.py (make docs): do not edit. -->",
        "",
        "%s %s (OpenAPI %s). %s" % (info.get("title", ""), info.get("version", ""),
                                    doc.get("openapi", ""), info.get("description", "")),
        "All paths are under the agent's URL. How to use the API, tokens and examples:",
        "[REST.md](REST.md). Role: the token role an operation needs (`none`: no token).",
        "",
    ]
    ops = {}
    for path, item in sorted(doc.get("paths", {}).items()):
        for m in METHODS:
            if m in item:
                op = item[m]
                tag = (op.get("tags") or ["other"])[0]
                ops.setdefault(tag, []).append((path, m, op))
    lines.append("## Endpoints")
    lines.append("")
    for tag in sorted(ops):
        lines += ["### %s" % tag, "",
                  "| method | path | role | what | request | success | errors |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for path, m, op in ops[tag]:
            role = op.get("x-isergw-role", "none" if op.get("security") == [] else "")
            req = type_of(content_schema(op.get("requestBody")))
            ok, errs = "", []
            for code in sorted(op.get("responses", {})):
                r = op["responses"][code]
                if code.startswith("2"):
                    t = type_of(content_schema(r))
                    ok = "%s %s" % (code, t) if t else code
                else:
                    errs.append(code)
            lines.append("| %s | `%s` | %s | %s | %s | %s | %s |" % (
                m.upper(), path, role, cell(op.get("summary", "")), req, ok, " ".join(errs)))
        lines.append("")
    lines += ["Every error answer is `{\"error\": {\"code\", \"message\", \"field\"}}`"
              " ([Error](#error)).", ""]
    lines.append("## Schemas")
    lines.append("")
    for name, s in sorted(doc.get("components", {}).get("schemas", {}).items()):
        lines += ["### %s" % name, ""]
        if s.get("description"):
            lines += [cell(s["description"]), ""]
        props = s.get("properties")
        if not props:
            lines += ["%s." % (type_of(s) or "any"), ""]
            continue
        required = set(s.get("required", []))
        lines += ["| field | type | constraints | default | description |",
                  "| --- | --- | --- | --- | --- |"]
        for key in sorted(props):
            p = props[key]
            default = "`%s`" % json.dumps(p["default"]) if "default" in p else ""
            lines.append("| `%s`%s | %s | %s | %s | %s |" % (
                key, " (required)" if key in required else "", type_of(p),
                cell(constraints(p)), cell(default), cell(p.get("description", ""))))
        lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: render-api.py OPENAPI.json\n")
        return 2
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    sys.stdout.write(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
