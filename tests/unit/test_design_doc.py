"""The design lives in the repository (docs/design.md): every citation of it resolves to one of its
sections, and nothing cites a design document kept elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# Built so that this file does not cite it either.
OUTSIDE_DESIGN = "DESIGN" + ".md"
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".sh", ""}
SKIPPED_DIRS = {".git", ".venv", ".cache", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache"}
# A citation of a design section: the page, "#" and the anchor (docs/design.md in code, design.md in docs/).
CITATION = re.compile(r"design\.md#([a-z0-9-]+)")
# A Markdown link to a page of docs/ with a section: `[text](page.md#anchor)`.
LINK = re.compile(r"\]\(([a-z0-9-]+\.md)#([a-z0-9-]+)\)")


def repository_files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        if any(part in SKIPPED_DIRS for part in path.relative_to(REPO).parts):
            continue
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            found.append(path)
    return sorted(found)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


def test_nothing_cites_a_design_document_outside_the_repository() -> None:
    citing = []
    for path in repository_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        citing += [
            f"{path.relative_to(REPO)}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE_DESIGN in line
        ]
    assert citing == [], "cite docs/design.md (by section) instead"


def test_every_citation_of_the_design_names_one_of_its_sections() -> None:
    sections = anchors(DOCS / "design.md")
    assert {"the-diagnosis-framework", "layout", "contracts", "budgets"} <= sections
    broken = []
    for path in repository_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            broken += [f"{path.relative_to(REPO)}:{n} #{a}" for a in CITATION.findall(line) if a not in sections]
    assert broken == []


@pytest.mark.parametrize("page", ["design.md", "contributing.md", "architecture.md", "performance.md"])
def test_the_design_pages_link_to_sections_that_exist(page: str) -> None:
    broken = []
    for target, anchor in LINK.findall((DOCS / page).read_text(encoding="utf-8")):
        if not (DOCS / target).is_file() or anchor not in anchors(DOCS / target):
            broken.append(f"{target}#{anchor}")
    assert broken == []


def test_the_anchor_rule_is_githubs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n## 3. Let the exporter find your engines\n### `once` and CLI: exit codes\ntext # no\n")
    assert anchors(page) == {"top", "3-let-the-exporter-find-your-engines", "once-and-cli-exit-codes"}
