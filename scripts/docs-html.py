#!/usr/bin/python3
"""docs-html.py OUT: the documentation as HTML pages for the isolated side, where the people who
read it have no web: README.md as index.html, docs/*.md and docs/*/*.md beside it, links
between them rewritten to the .html pages, images and example files copied. Deterministic (no
dates, sorted).

Markdown is rendered by Python-Markdown (Debian's python3-markdown, pip's `markdown`), with its
tables, fenced code and heading ids (`toc`): a maintained renderer, not one written here.
scripts/release.sh ships the result as /usr/share/doc/airlock/html and in the tarball."""
import html
import pathlib
import re
import shutil
import sys

try:
    import markdown
except ImportError:
    sys.exit("docs-html.py: Python-Markdown is needed (apt-get install python3-markdown, or pip install markdown)")

STYLE = """body{max-width:60rem;margin:2rem auto;padding:0 1rem;font:16px/1.5 system-ui,sans-serif;color:#222}
pre,code{font:14px/1.4 ui-monospace,monospace;background:#f4f4f4}pre{padding:.6rem;overflow-x:auto}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .4rem;vertical-align:top}
nav{font-size:14px;border-bottom:1px solid #ccc;padding-bottom:.5rem}img{max-width:100%}"""


def pages(repo):
    """(source, page name) for every page, README first."""
    out = [(repo / "README.md", "index.html")]
    for md in sorted((repo / "docs").glob("*.md")) + sorted((repo / "docs").glob("*/*.md")):
        rel = md.relative_to(repo / "docs").with_suffix(".html")
        out.append((md, str(rel)))
    return out


def relink(text, source, repo, names):
    """Links to another page's .md become links to its .html, relative to this page."""
    here = pathlib.PurePosixPath(names[source]).parent

    def one(m):
        target, anchor = m.group(2), m.group(3) or ""
        if re.match(r"^[a-z]+:", target):
            return m.group(0)
        path = (source.parent / target).resolve()
        if path in names:
            rel = pathlib.PurePosixPath(names[path])
            up = "../" * len(here.parts)
            return "%s%s%s%s)" % (m.group(1), up, rel, anchor)
        return m.group(0)

    return re.sub(r"(\]\()([^)#\s]+\.md)(#[^)\s]*)?\)", one, text)


def main():
    out = pathlib.Path(sys.argv[1])
    repo = pathlib.Path(__file__).resolve().parent.parent
    found = pages(repo)
    names = {src.resolve(): name for src, name in found}
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    nav_items = [(name, src.stem if name != "index.html" else "airlock") for src, name in found]
    for src, name in found:
        text = relink(src.read_text(encoding="utf-8"), src, repo, names)
        body = markdown.markdown(text, extensions=["tables", "fenced_code", "toc"], output_format="html")
        up = "../" * (len(pathlib.PurePosixPath(name).parts) - 1)
        nav = " · ".join('<a href="%s%s">%s</a>' % (up, n, html.escape(t)) for n, t in nav_items)
        title = next((l[2:] for l in text.splitlines() if l.startswith("# ")), src.stem)
        page = out / name
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>"
            "<style>%s</style></head>\n<body><nav>%s</nav>\n%s\n</body></html>\n"
            % (html.escape(title), STYLE, nav, body),
            encoding="utf-8",
        )
    # What the pages link to beside them: screenshots, example configurations.
    for extra in ("images", "examples"):
        if (repo / "docs" / extra).is_dir():
            shutil.copytree(repo / "docs" / extra, out / extra)
    print("%d pages in %s" % (len(found), out))


if __name__ == "__main__":
    main()
