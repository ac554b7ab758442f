"""Start-up errors through the real command line: exit 2 and one line that names the culprit.

Each case runs `python -m exporter ...` as a user would. A case that wrongly starts a server would
hang; the subprocess timeout turns that into a failure.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, free_port

pytestmark = pytest.mark.integration

EXIT_USAGE = 2


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *names: str) -> str:
    assert result.returncode == EXIT_USAGE, f"exit {result.returncode}; stderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stderr, got:\n{result.stderr}"
    for name in names:
        assert name in lines[0], f"{name!r} not named in: {lines[0]}"
    return lines[0]


def write(tmp_path: Path, text: str, name: str = "exporter.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def serve_with_config(path: Path) -> subprocess.CompletedProcess[str]:
    # A free port: a config wrongly accepted would start serving and run into the timeout.
    return run_cli("serve", "--config", str(path), "--gpu", "none", "--listen", f"127.0.0.1:{free_port()}")


# --- the configuration file -------------------------------------------------------------------


def test_unknown_key_in_yaml_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "interval_seconds: 5\nscrape_intervall: 10\n")
    assert_one_line_error(serve_with_config(path), "scrape_intervall", "unknown key")


def test_unknown_key_inside_an_engine_is_named_with_its_path(tmp_path: Path) -> None:
    path = write(tmp_path, "engines:\n  - url: http://127.0.0.1:8000/metrics\n    timeout: 3\n")
    assert_one_line_error(serve_with_config(path), "engines[0].timeout")


def test_wrong_type_in_yaml_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "interval_seconds: [5]\n")
    assert_one_line_error(serve_with_config(path), "interval_seconds", "number")


def test_boolean_where_a_number_belongs_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "engines:\n  - url: http://127.0.0.1:8000/metrics\n    timeout_seconds: yes\n")
    assert_one_line_error(serve_with_config(path), "engines[0].timeout_seconds")


def test_bad_engine_url_in_yaml_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "engines:\n  - url: localhost:8000/metrics\n")
    assert_one_line_error(serve_with_config(path), "engines[0].url", "localhost:8000/metrics")


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    assert_one_line_error(serve_with_config(missing), str(missing))


def test_invalid_yaml_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "interval_seconds: 5\nengines: [unclosed\n")
    line = assert_one_line_error(serve_with_config(path), str(path), "YAML")
    assert f"{path}:" in line  # file:line points at the problem


def test_config_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    """A Latin-1 file (found by tests/fuzz/config_fuzzer.py): was a UnicodeDecodeError traceback."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes("engines:\n  - url: http://127.0.0.1:8000/metrics\n    model: caf\u00e9\n".encode("latin-1"))
    assert_one_line_error(serve_with_config(path), str(path), "not UTF-8")
    assert_one_line_error(run_cli("check-config", str(path)), str(path), "not UTF-8")


# --- flags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--interval", "abc"], ["--interval", "abc"]),
        (["--interval", "-1"], ["--interval"]),
        (["--interval", "0"], ["--interval"]),
        (["--engine", "foo=http://x"], ["--engine", "foo"]),
        (["--engine", "vllm=localhost:8000/metrics"], ["--engine"]),
        (["--engine", "vllm=http://127.0.0.1:notaport/metrics"], ["--engine"]),
        (["--gpu", "bogus"], ["--gpu", "bogus"]),
        (["--listen", "127.0.0.1:70000"], ["--listen"]),
        (["--listen", "nine-four-seven-seven"], ["--listen"]),
        (["--window", "1", "--interval", "5"], ["--window"]),
        (["--log-level", "loud"], ["--log-level"]),
        (["--no-such-flag"], ["--no-such-flag"]),
    ],
    ids=[
        "interval_not_a_number",
        "interval_negative",
        "interval_zero",
        "engine_unknown_type",
        "engine_url_without_scheme",
        "engine_url_bad_port",
        "gpu_unknown_mode",
        "listen_port_out_of_range",
        "listen_without_port",
        "window_shorter_than_interval",
        "log_level_unknown",
        "unknown_flag",
    ],
)
def test_bad_flag_is_named(args: list[str], names: list[str]) -> None:
    assert_one_line_error(run_cli("serve", *args), *names)


def test_bad_flag_is_named_by_once_too() -> None:
    assert_one_line_error(run_cli("once", "--interval", "abc"), "--interval")


def test_malformed_ipv6_engine_url_is_named() -> None:
    assert_one_line_error(run_cli("serve", "--engine", "vllm=http://[::1/metrics"), "--engine")


def test_port_in_use_is_named() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        # Default --gpu (auto): start-up logging must not add lines before the error.
        result = run_cli("serve", "--listen", f"127.0.0.1:{port}")
    line = assert_one_line_error(result, "--listen", str(port))
    assert "in use" in line


# --- check-config -----------------------------------------------------------------------------


def test_check_config_accepts_a_valid_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        (
            "listen: 127.0.0.1:9477\n"
            "interval_seconds: 2\n"
            "engine_defaults:\n  timeout_seconds: 1.5\n"
            "engines:\n"
            "  - url: http://127.0.0.1:8000/metrics\n    type: vllm\n    name: vllm-0\n"
            "  - http://127.0.0.1:30000/metrics\n"
        ),
    )
    result = run_cli("check-config", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "ok" in result.stdout


def test_check_config_rejects_an_invalid_file_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "engines:\n  - url: http://127.0.0.1:8000/metrics\n    type: ollama\n")
    assert_one_line_error(run_cli("check-config", str(path)), "engines[0].type", "ollama")


def test_check_config_names_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    assert_one_line_error(run_cli("check-config", str(missing)), str(missing))


def test_check_config_names_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "engines:\n  - url: [\n")
    assert_one_line_error(run_cli("check-config", str(path)), str(path), "YAML")


def test_check_config_rejects_a_top_level_list(tmp_path: Path) -> None:
    path = write(tmp_path, "- http://127.0.0.1:8000/metrics\n")
    assert_one_line_error(run_cli("check-config", str(path)), str(path), "mapping")
