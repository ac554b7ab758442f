"""Finding the lines a parse reads, at C speed: the wanted names as a trie in one regex, the names
a payload declares for detection, the `# TYPE` lines of wanted families."""

from __future__ import annotations

import re
from functools import lru_cache

# A `# TYPE` line's family, or a sample line's name (up to its labels or value).
_NAMES = re.compile(r"\n[ \t]*+(?:#[ \t]+TYPE[ \t]+([^\s]+)|([^{ \t\n#][^{ \t\n]*))")
#: suffixes a sample name carries after its family's name (OpenMetrics names the family without them)
FAMILY_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created", "_info", "_gcount", "_gsum")

#: OpenMetrics' last line (found by the wanted-lines scan, as itself: anything after it is not read)
EOF = "# EOF"
EOF_LINE = re.compile(r"\n[ \t]*+# EOF")
#: engine detection reads names from this much of the head of a payload...
NAMES_HEAD_CHARS = 1 << 20
#: ...and keeps at most this many: real engines expose a few hundred, a hostile one millions
MAX_NAMES = 4096


@lru_cache(maxsize=64)
def wanted_lines(wanted: frozenset[str]) -> re.Pattern[str]:
    """A regex finding the lines that start with a wanted name followed by `{`, a blank or nothing.

    The scan runs in C, so an unwanted line costs a few nanoseconds, not a turn of a Python loop:
    a body of millions of short unwanted lines is read at memory speed. The names are factored into
    a trie, since sre tries the alternatives of a group one after another. A name alone on its line
    is found too: a malformed wanted line, to be counted.
    """
    # A literal "\n" first, not `^` with MULTILINE: sre then skips to each newline at C speed
    # instead of trying the pattern at every character. Blocks are fed with a "\n" in front.
    # Blanks before a name are allowed (the text format's parsers skip them), and left out.
    return re.compile(r"\n[ \t]*+(" + _trie_pattern(sorted(wanted)) + r"(?=[{ \t\n]|\Z)[^\n]*|" + EOF + ")")


@lru_cache(maxsize=64)
def declared_families(wanted: frozenset[str]) -> tuple[re.Pattern[str], dict[str, frozenset[str]]]:
    """A regex finding `# TYPE` lines of the wanted names' families, and each family's wanted names."""
    names: dict[str, set[str]] = {}
    for name in wanted:
        names.setdefault(name, set()).add(name)
        for suffix in FAMILY_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                names.setdefault(name[: -len(suffix)], set()).add(name)
    pattern = re.compile(r"\n[ \t]*+#[ \t]+TYPE[ \t]+(" + _trie_pattern(sorted(names)) + r")[ \t]")
    return pattern, {family: frozenset(members) for family, members in names.items()}


def _trie_pattern(names: list[str]) -> str:
    if not names:
        return "(?!)"  # matches nothing
    trie: dict[str, dict] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a name ends here and longer ones go on
            return body + "?" if len(branches) == 1 and len(body) == 1 else "(?:" + body + ")?"
        return body

    return pattern(trie)


def sample_names(text: str, limit_bytes: int = NAMES_HEAD_CHARS) -> set[str]:
    """The distinct sample and family names in (the head of) a payload, for engine detection.

    `# TYPE` lines count too: an engine that has not served a request yet may expose families
    with no samples.
    """
    names: set[str] = set()
    add_names(text, names, limit_bytes)
    return names


def add_names(block: str, names: set[str], budget: int) -> int:
    """Add the names in the first `budget` characters of `block` while MAX_NAMES lasts; return the
    budget left. A regex finds them, so a head of short lines costs no Python turn per line."""
    for match in _NAMES.finditer("\n" + block[:budget]):
        if len(names) >= MAX_NAMES:
            return 0
        names.add(match.group(1) or match.group(2))
    return budget - len(block) - 1
