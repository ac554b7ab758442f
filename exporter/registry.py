"""Name lists stated once: each implementation registers itself (node_exporter's registerCollector).

An engine type, a gateway type and a GPU mode each exist because a module implements them: that
module registers its entry under its name, and its package imports every module of itself
(`import_modules`), so adding one is adding its file. The configuration's validation, the CLI's
help, Kubernetes discovery, detection and the docs' checks read the registry; no second list of
names exists to keep in step (docs/contributing.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Entries by name, iterated in their registered order (lower first, then by name).

    The order is where it matters which entry is tried first (engine and gateway detection);
    elsewhere every entry keeps the default and the names read alphabetically.
    """

    def __init__(self, what: str, name_of: Callable[[T], str]) -> None:
        self.what = what
        self._name_of = name_of
        self._entries: dict[str, tuple[int, T]] = {}
        self._ordered: tuple[str, ...] = ()

    def register(self, entry: T, order: int = 0) -> T:
        """Add `entry` under its name; a name another module already took is a programming error."""
        name = self._name_of(entry)
        if not name:
            raise ValueError(f"a {self.what} needs a name")
        if name in self._entries:
            previous = self._entries[name][1]
            if type(previous).__module__ != type(entry).__module__:
                raise ValueError(f"{self.what} {name!r} is registered twice ({type(previous).__module__} first)")
        self._entries[name] = (order, entry)
        self._reorder()
        return entry

    def unregister(self, name: str) -> None:
        """Remove an entry (a test's throwaway one)."""
        del self._entries[name]
        self._reorder()

    def _reorder(self) -> None:
        self._ordered = tuple(sorted(self._entries, key=lambda name: (self._entries[name][0], name)))

    def names(self) -> tuple[str, ...]:
        """Every name, alphabetically: the listing users read (help, errors, docs)."""
        return tuple(sorted(self._entries))

    def listing(self, decorate: Callable[[str], str] = str) -> str:
        """The names as a user reads them in help and errors: "a, b or c"."""
        shown = [decorate(name) for name in self.names()]
        return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"

    def __getitem__(self, name: str) -> T:
        return self._entries[name][1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ordered)

    def __len__(self) -> int:
        return len(self._entries)


def import_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of a package (its `__name__` and `__path__`), so each registers itself."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")
