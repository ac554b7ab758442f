"""Read `<sysfs>/class/infiniband/*/ports/*` into typed dataclasses.

Layout and formats are the kernel's (`drivers/infiniband/core/sysfs.c`, ABI document
`sysfs-class-infiniband`); see shared/research/rdma-counters.md. This module only reads: which
counters mean what, and how they become metrics, is the RDMA source's business.

Unlike procfs (whose parse error fails node_exporter's whole collector), a file that cannot be read
or parsed — "N/A (no PMA)" from a PMA-less driver, EINVAL from new firmware, a device removed while
we read it — only leaves that value out; its path is recorded in `InfiniBandPort.unreadable`. A
device or port whose directory vanished during the read is left out whole, since half of it would
mix two lifetimes of its counters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

#: port_xmit_data / port_rcv_data count octets divided by 4 on every driver and link width
#: (Mellanox in node_exporter #573; mlx5 emulates them as `octets >> 2`).
DATA_WORD_OCTETS = 4
#: counters whose kernel value is in 4-octet words; the reader returns them in bytes
DATA_WORD_COUNTERS = frozenset({"port_xmit_data", "port_rcv_data", "port_xmit_data_64", "port_rcv_data_64"})
#: `rate` is printed in Gb/s (10^9 bit/s): bytes/s = Gb/s x 10^9 / 8, as procfs converts it
_BYTES_PER_GBIT = 125_000_000

_STATE = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec\b")


@dataclass(frozen=True, slots=True)
class PortState:
    """`state` / `phys_state` as the kernel prints them: "4: ACTIVE" is PortState(4, "ACTIVE")."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class InfiniBandPort:
    """One port's files. `None` or a missing key means the kernel did not give that value.

    Counter maps are keyed by the kernel's file names. Values are integers as printed, except the
    data counters (`DATA_WORD_COUNTERS`), which are converted from 4-octet words to bytes.
    """

    device: str
    port: int
    state: PortState | None = None
    phys_state: PortState | None = None
    rate_bytes_per_second: float | None = None
    link_layer: str | None = None
    #: the RoCE / soft-RoCE network interface, where the kernel exposes it
    netdev: str | None = None
    #: counters/ — IBA PMA PortCounters(+Extended); one MAD to the firmware per file read
    counters: Mapping[str, int] = field(default_factory=dict)
    #: counters_ext/ — the 64-bit PortCountersExtended of kernels before 4.5 / OFED
    counters_ext: Mapping[str, int] = field(default_factory=dict)
    #: hw_counters/ — driver-defined (mlx5 Q and congestion counters, rxe, irdma, ...), `lifespan` excluded
    hw_counters: Mapping[str, int] = field(default_factory=dict)
    #: hw_counters/lifespan: milliseconds the driver caches hw_counters for (default 10)
    hw_counters_lifespan_ms: int | None = None
    #: files that exist but could not be read or parsed, relative to the port directory
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class InfiniBandDevice:
    name: str
    fw_ver: str | None = None
    board_id: str | None = None
    hca_type: str | None = None
    ports: tuple[InfiniBandPort, ...] = ()


def class_path(sysfs: str) -> str:
    return os.path.join(sysfs, "class", "infiniband")


#: counter directory ("counters", "counters_ext", "hw_counters") -> the file names to read; a
#: directory not named is read whole
Wanted = Mapping[str, frozenset[str]]

#: a port's own attribute files (`netdev` stands for the GID table / parent lookup behind it)
PORT_ATTRIBUTES = frozenset({"state", "phys_state", "rate", "link_layer", "netdev"})


def read_infiniband_class(
    sysfs: str,
    wanted: Wanted | None = None,
    attributes: frozenset[str] = PORT_ATTRIBUTES,
    device_info: bool = True,
) -> list[InfiniBandDevice]:
    """Every device under `<sysfs>/class/infiniband`, sorted by name; [] when there is none.

    `wanted` limits the counter files read to those a caller uses, `attributes` the port's own
    files (of `PORT_ATTRIBUTES`) and `device_info` the device's fw_ver, board_id and hca_type: on a
    real HCA every counters/ read is a MAD to the firmware, and each file costs a few syscalls here
    either way.
    """
    root = class_path(sysfs)
    devices = []
    for name in _list_dir(root):
        device = read_device(os.path.join(root, name), name, wanted, attributes, device_info)
        if device is not None:
            devices.append(device)
    return devices


def read_device(
    path: str,
    name: str,
    wanted: Wanted | None = None,
    attributes: frozenset[str] = PORT_ATTRIBUTES,
    device_info: bool = True,
) -> InfiniBandDevice | None:
    """One device and its ports; None when the device is gone."""
    ports_dir = os.path.join(path, "ports")
    try:
        entries = sorted(os.listdir(ports_dir), key=_port_sort_key)
    except OSError:
        return None
    ports = []
    for entry in entries:
        if entry.isdigit():
            port = read_port(os.path.join(ports_dir, entry), name, int(entry), wanted, attributes)
            if port is not None:
                ports.append(port)
    fw_ver = board_id = hca_type = None
    if device_info:
        fw_ver, board_id, hca_type = (_read_text(os.path.join(path, f), []) for f in ("fw_ver", "board_id", "hca_type"))
    if not os.path.isdir(ports_dir):
        return None
    return InfiniBandDevice(name, fw_ver, board_id, hca_type, tuple(ports))


def read_port(
    path: str,
    device: str,
    port: int,
    wanted: Wanted | None = None,
    attributes: frozenset[str] = PORT_ATTRIBUTES,
    listed: bool = True,
) -> InfiniBandPort | None:
    """One port's files; None when the port directory vanished while it was being read.

    Attribute files left out of `attributes` read as None; a counter directory whose wanted set is
    empty is not opened. Each counter directory is listed and only the wanted names it holds are
    opened (a driver has a third of the names the mapping knows), unless `listed` is False: the
    wanted names come from an earlier listing, and are opened without one.
    """
    unreadable: list[str] = []
    state = _parsed(path, "state", parse_state, unreadable) if "state" in attributes else None
    phys_state = _parsed(path, "phys_state", parse_state, unreadable) if "phys_state" in attributes else None
    rate = _parsed(path, "rate", parse_rate, unreadable) if "rate" in attributes else None
    link_layer = None
    if "link_layer" in attributes:
        link_layer = _read_text(os.path.join(path, "link_layer"), unreadable, "link_layer")
    counters, counters_ext, hw_counters = (
        _read_counters(path, directory, unreadable, (wanted or {}).get(directory), listed)
        for directory in ("counters", "counters_ext", "hw_counters")
    )
    lifespan = hw_counters.pop("lifespan", None)
    netdev = _netdev(path, link_layer) if "netdev" in attributes else None
    if not os.path.isdir(path):
        return None
    return InfiniBandPort(
        device=device,
        port=port,
        state=state,
        phys_state=phys_state,
        rate_bytes_per_second=rate,
        link_layer=link_layer,
        netdev=netdev,
        counters=counters,
        counters_ext=counters_ext,
        hw_counters=hw_counters,
        hw_counters_lifespan_ms=lifespan,
        unreadable=tuple(unreadable),
    )


def parse_state(text: str) -> PortState | None:
    match = _STATE.match(text)
    return PortState(int(match.group(1)), match.group(2)) if match else None


def parse_rate(text: str) -> float | None:
    """ "200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)" or old kernels' "10 Gb/sec (4X)" -> bytes/s.

    Only the leading number counts: it is already speed x width (procfs reads it the same way).
    """
    match = _RATE.match(text)
    if match is None:
        return None
    return float(match.group(1)) * _BYTES_PER_GBIT


def _netdev(port_path: str, link_layer: str | None) -> str | None:
    """The netdev behind a RoCE port: the kernel's GID table names it (what `ibdev2netdev` reads);
    soft-RoCE devices also name their parent interface. IB ports have none (the read fails), so
    they are not asked."""
    if link_layer != "Ethernet":
        return None
    name = _read_text(os.path.join(port_path, "gid_attrs", "ndevs", "0"), [])
    if name:
        return name
    return _read_text(os.path.join(port_path, os.pardir, os.pardir, "parent"), []) or None


def _read_counters(
    port_path: str, directory: str, unreadable: list[str], wanted: frozenset[str] | None = None, listed: bool = True
) -> dict[str, int]:
    """The directory's counters (only the `wanted` ones, when given), in name order.

    Files are opened relative to the directory (`dir_fd`): no path to join and walk per file. The
    directory is listed unless `listed` is False, when the `wanted` names are opened as they are
    and a name that is not there is simply absent.
    """
    values: dict[str, int] = {}
    if wanted is not None and not wanted:
        return values
    try:
        directory_fd = os.open(os.path.join(port_path, directory), os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return values
    try:
        if wanted is None:
            names = sorted(os.listdir(directory_fd))
        elif listed:
            names = sorted(wanted.intersection(os.listdir(directory_fd)))
        else:
            names = sorted(wanted)
        for name in names:
            text = _read_bytes(name, directory_fd)  # int() takes the bytes as they are
            if text is None:
                if _exists_at(directory_fd, name):  # there, but not readable; absent is silent
                    unreadable.append(f"{directory}/{name}")
                continue
            try:
                value = int(text)
            except ValueError:  # "N/A (no PMA)" and anything else a driver prints instead of a number
                unreadable.append(f"{directory}/{name}")
                continue
            values[name] = value * DATA_WORD_OCTETS if name in DATA_WORD_COUNTERS else value
    except OSError:  # the directory went away while listed
        pass
    finally:
        os.close(directory_fd)
    return values


def _exists_at(directory_fd: int, name: str) -> bool:
    """Whether `name` exists (a dangling symlink too, as os.path.lexists says)."""
    try:
        os.lstat(name, dir_fd=directory_fd)
    except OSError:
        return False
    return True


def _parsed(port_path: str, name: str, parse: Callable[[str], T | None], unreadable: list[str]) -> T | None:
    text = _read_text(os.path.join(port_path, name), unreadable, name)
    if text is None:
        return None
    value = parse(text)
    if value is None:
        unreadable.append(name)
    return value


def _read_text(path: str, unreadable: list[str], label: str | None = None) -> str | None:
    """The stripped content; None when absent (silently) or unreadable (recorded under `label`)."""
    raw = _read_raw(path)
    if raw is None:
        if label is not None and os.path.lexists(path):
            unreadable.append(label)
        return None
    return raw.strip()


def _read_raw(path: str, directory_fd: int | None = None) -> str | None:
    data = _read_bytes(path, directory_fd)
    if data is None:
        return None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _read_bytes(path: str, directory_fd: int | None = None) -> bytes | None:
    # os.open/os.read: a sysfs attribute is one small page, and this is several times cheaper than
    # open(); it matters at ~60 files per port. `directory_fd`: `path` is a name in that directory.
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=directory_fd)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def _list_dir(path: str) -> list[str]:
    """Sorted entries; an absent or unlistable directory reads as empty."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _port_sort_key(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)
