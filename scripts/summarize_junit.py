"""Print one closing line over all test tiers: 'tests: N passed, N failed, N skipped'.

Each tier is its own pytest run (they need different environments); the line adds them up so a
reader, or CI, sees the whole in one place. A missing report counts as a failure.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def main(paths: list[str]) -> int:
    passed = failed = skipped = 0
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            print(f"missing or unreadable test report: {path}", file=sys.stderr)
            failed += 1
            continue
        for suite in root.iter("testsuite"):
            tests = int(suite.get("tests", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skip = int(suite.get("skipped", 0))
            failed += bad
            skipped += skip
            passed += tests - bad - skip
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
