"""The one validation layer for every configuration-like input: the exporter's configuration, the
monitoring configuration, the web configuration and simulator scenarios.

Every user error is a ConfigError whose text has one shape, `where: problem`, with `where` the key
path (`engines[1].url`), the flag (`--interval`) or the file (`my.yaml:3`); the CLI prints that one
line and exits 2. Loading is bounded: a file too large, nested too deep or expanding too many YAML
aliases is refused before anything walks it.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import re2  # type: ignore[import-untyped]
import yaml

#: configuration files are hand-written: a megabyte is far past any real one
MAX_FILE_BYTES = 1024 * 1024
#: mappings and lists nested deeper than this are a mistake or an attack (RecursionError)
MAX_DEPTH = 32
#: aliases (`*name`) a file may use; each can expand to a whole subtree ("billion laughs")
MAX_ALIASES = 64

# Prometheus durations: one or more number+unit pairs, largest unit first ("1h30m", "15s").
_DURATION = re.compile(r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$")


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is a ConfigError, not a line on stderr


class ConfigError(Exception):
    """A user error in the configuration or flags; `where` is the key path or flag name."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting and alias expansion past the bounds above."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Bounds(f"more than {MAX_ALIASES} YAML aliases")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Bounds(f"nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Bounds(Exception):
    pass


def load_yaml_text(text: str, where: str) -> Any:
    """Parse YAML text within the bounds; errors name `where` (and the line when YAML knows it)."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(where, f"larger than {MAX_FILE_BYTES // 1024} KiB")
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)
        return loader.get_single_data()
    except _Bounds as exc:
        raise ConfigError(where, str(exc)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        raise ConfigError(at, f"not valid YAML ({getattr(exc, 'problem', None) or exc})") from exc
    finally:
        if loader is not None:
            loader.dispose()


def load_file(path: str) -> dict[str, Any]:
    """Read a YAML file into a mapping; an empty file is an empty configuration."""
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise ConfigError(path, f"larger than {MAX_FILE_BYTES // 1024} KiB")
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(path, exc.strerror or str(exc)) from exc
    except UnicodeDecodeError as exc:  # found by tests/fuzz/config_fuzzer.py: was a traceback, exit 1
        raise ConfigError(
            path, f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})"
        ) from exc
    return load_yaml_mapping(text, path)


def load_yaml_mapping(text: str, where: str) -> dict[str, Any]:
    """YAML text whose top level is a mapping (every configuration-like input is one); empty is {}."""
    data = load_yaml_text(text, where)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(where, f"the top level must be a mapping, not {type_name(data)}")
    return data


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "empty"}.get(
        type(value), type(value).__name__
    )


def required(value: Any, where: str) -> Any:
    """A key without a default: absent (or empty) says "missing" rather than "not empty"."""
    if value is None:
        raise ConfigError(where, "missing")
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping, not {type_name(value)}")
    return value


def sequence(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(where, f"must be a list, not {type_name(value)}")
    return value


def non_empty_sequence(value: Any, where: str) -> list[Any]:
    """A list that needs at least one item (an empty one would configure nothing)."""
    if not sequence(value, where):
        raise ConfigError(where, "must be a non-empty list")
    return value


def known_keys(value: Mapping[str, Any], where: str, known: Sequence[str]) -> None:
    """Every key of `value` is one of `known`; `where` "" for the top level."""
    for key in value:
        if key not in known:
            at = f"{where}.{key}" if where else str(key)
            raise ConfigError(at, f"unknown key (known: {', '.join(known)})")


def section(value: Any, where: str, known: Sequence[str]) -> dict[str, Any]:
    """A mapping whose keys are all `known`."""
    result = mapping(value, where)
    known_keys(result, where, known)
    return result


def string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(where, f"must be a non-empty string, not {type_name(value)}")
    return value


def optional_string(value: Any, where: str) -> str | None:
    return None if value is None else string(value, where)


def string_or_empty(value: Any, where: str) -> str:
    """Free text that may be left out, such as a description; empty is ""."""
    return _string_or_empty(value, where, "a string")


def path_or_empty(value: Any, where: str) -> str:
    """A file path where "" (or empty) turns the feature off."""
    return _string_or_empty(value, where, "a path or empty")


def _string_or_empty(value: Any, where: str, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(where, f"must be {what}, not {type_name(value)}")
    return value


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(where, f"must be true or false, not {value!r}")
    return value


def choice(value: Any, where: str, choices: Sequence[str]) -> str:
    text = string(value, where)
    if text not in choices:
        raise ConfigError(where, f"{text!r} is not one of {', '.join(choices)}")
    return text


def number(value: Any, where: str, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite number within [minimum, maximum] where given."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(where, f"must be a number, not {type_name(value)}")
    try:
        result = float(value)
    except ValueError as exc:
        raise ConfigError(where, f"must be a number, not {value!r}") from exc
    if not math.isfinite(result):
        raise ConfigError(where, f"must be finite, not {value!r}")
    if minimum is not None and result < minimum:
        raise ConfigError(where, f"must be at least {minimum:g}, not {value!r}")
    if maximum is not None and result > maximum:
        raise ConfigError(where, f"must be at most {maximum:g}, not {value!r}")
    return result


def non_negative(value: Any, where: str, maximum: float | None = None) -> float:
    return number(value, where, 0.0, maximum)


def positive_number(value: Any, where: str, maximum: float | None = None) -> float:
    result = number(value, where, None, maximum)
    if result <= 0:
        raise ConfigError(where, f"must be greater than 0, not {value!r}")
    return result


def positive_int(value: Any, where: str, maximum: int | None = None) -> int:
    return _whole(positive_number(value, where, maximum), value, where)


def integer(value: Any, where: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number within [minimum, maximum] where given (a count that may be 0, a seed)."""
    return _whole(number(value, where, minimum, maximum), value, where)


def _whole(result: float, value: Any, where: str) -> int:
    if result != int(result):
        raise ConfigError(where, f"must be a whole number, not {value!r}")
    return int(result)


def url(value: Any, where: str) -> str:
    """An http(s) URL with a host and a valid port."""
    text = string(value, where)
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise ConfigError(where, f"not a valid URL: {text!r} ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(where, f"not an http(s) URL: {text!r}")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ConfigError(where, f"bad port in {text!r}") from exc
    return text


def duration(value: Any, where: str) -> str:
    """A Prometheus duration such as 30s, 5m or 1h30m."""
    text = string(value, where)
    if not _DURATION.match(text):
        raise ConfigError(where, f"must be a Prometheus duration such as 30s, 5m or 1h, not {value!r}")
    return text


def linear_regex(pattern: str) -> Any:
    """`pattern` compiled with RE2: matching takes time linear in the input whatever the pattern
    (Python's backtracking `re` can take exponential time on a nested quantifier such as `(a+)+$`,
    holding the GIL and with it the whole process), and its syntax is PromQL's `=~` syntax. Raises
    re2.error for a pattern RE2 refuses (backreferences and lookarounds included)."""
    return re2.compile(pattern, _RE2_OPTIONS)


def regex(value: Any, where: str) -> str:
    """A regular expression in RE2 (PromQL) syntax, returned as its text."""
    text = string(value, where)
    try:
        linear_regex(text)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ConfigError(where, f"not a valid RE2 regular expression, as PromQL's =~ takes ({detail})") from exc
    return text


def parse_listen(value: Any, where: str) -> tuple[str, int]:
    """HOST:PORT of a listener (an IP address or localhost; [::1]:PORT for IPv6)."""
    text = string(value, where)
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(where, f"expected HOST:PORT, got {text!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ConfigError(where, f"port {port} out of range 1-65535")
    host = host.strip("[]") or "0.0.0.0"
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError as exc:
            raise ConfigError(where, f"{host!r} is not an IP address or localhost") from exc
    return host, port
