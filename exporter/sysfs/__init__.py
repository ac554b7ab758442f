"""Readers of Linux sysfs into typed dataclasses, apart from any metric mapping (as prometheus/procfs).

Each reader tolerates a kernel that answers some files with errors: it leaves that value out and
reads the rest, so one odd driver never costs the readings of the others.
"""

from exporter.sysfs.infiniband import InfiniBandDevice, InfiniBandPort, PortState, read_infiniband_class

__all__ = ["InfiniBandDevice", "InfiniBandPort", "PortState", "read_infiniband_class"]
