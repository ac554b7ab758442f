"""The HTML page and the Markdown ticket text, from jinja2 templates.

The HTML inlines every plot's SVG and its style sheet: it is one file that shows the same offline,
attached to a ticket or years later. The Markdown refers to the plots as SVG files written next to
it, which ticket systems and Git forges show as images.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from exporter.report.build import Report
from exporter.report.plots import plots
from exporter.report.present import context

_ENV = Environment(
    loader=PackageLoader("exporter.report", "templates"),
    autoescape=select_autoescape(["html", "html.j2"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_html(report: Report) -> str:
    images = [{"key": p.key, "title": p.title, "svg": p.svg} for p in plots(report)]
    return _ENV.get_template("report.html.j2").render(**context(report, images))


def render_markdown(report: Report, out: Path | None) -> tuple[str, dict[Path, str]]:
    """The Markdown text and the image files it refers to (beside `out`, or the working directory)."""
    stem = out.stem if out is not None else "report"
    folder = out.parent if out is not None else Path(".")
    files: dict[Path, str] = {}
    images = []
    for p in plots(report):
        name = f"{stem}-{p.key}.svg"
        files[folder / name] = '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + p.svg
        images.append({"key": p.key, "title": p.title, "path": name})
    return _ENV.get_template("report.md.j2").render(**context(report, images)), files
