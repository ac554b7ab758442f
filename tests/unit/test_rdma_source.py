"""The RDMA source: fixture trees mapped to `llm_rdma_port_*`, and a live tree the tests advance
between collections (steady traffic, a 32-bit wrap, a saturated counter, a port going DOWN, a
device disappearing, a file becoming unreadable), and the read cadence: every file on a full read,
the fast-moving ones in between."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.app import build_pipeline
from exporter.model import Metric, Sample
from exporter.settings import Config, GpuSettings
from exporter.sources.base import SourceError
from exporter.sources.rdma import RdmaSource, counter_increment
from tests.sysfs_trees import (
    ROCE_COUNTERS,
    ROCE_HW_COUNTERS,
    LiveTree,
    build_fixture_tree,
    roce_mlx5_tree,
    write_port,
)

U32 = 1 << 32


def series(metrics: list[Metric]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for m in metrics:
        assert isinstance(m, Sample)
        key = (m.name, frozenset(m.labels.items()))
        assert key not in out, f"duplicate series {key}"
        out[key] = m.value
    return out


def value(metrics: list[Metric], name: str, device: str, port: int = 1, **labels: str) -> float | None:
    return series(metrics).get((name, frozenset({"device": device, "port": str(port), **labels}.items())))


def names_for(metrics: list[Metric], device: str, port: int = 1) -> set[str]:
    return {m.name for m in metrics if m.labels.get("device") == device and m.labels.get("port") == str(port)}


@pytest.fixture
def live(tmp_path: Path) -> LiveTree:
    return LiveTree(roce_mlx5_tree(tmp_path))


def two_port_tree(root: Path) -> LiveTree:
    """The live tree's mlx5_0 and a second device, mlx5_1, alike."""
    roce_mlx5_tree(root)
    write_port(root, "mlx5_1", counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev="ens1f1np1")
    return LiveTree(root)


# --- the upstream captures ---------------------------------------------------------------------


def test_procfs_capture_maps_to_our_families(tmp_path: Path) -> None:
    metrics = RdmaSource(str(build_fixture_tree(tmp_path, "procfs")), 60).collect(0.0)
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "hfi1_0") == 273558326543 * 4
    assert value(metrics, "llm_rdma_port_receive_bytes_total", "mlx4_0", 2) == 2460436784 * 4
    assert value(metrics, "llm_rdma_port_transmit_packets_total", "mlx5_0") == 10907922116
    assert value(metrics, "llm_rdma_port_link_rate_bytes_per_second", "mlx4_0", 1) == 5e9
    assert value(metrics, "llm_rdma_port_up", "mlx5_0") == 1.0
    assert value(metrics, "llm_rdma_port_transmit_wait_total", "mlx4_0", 2) == 3846
    assert value(metrics, "llm_rdma_port_info", "mlx5_0", link_layer="InfiniBand", netdev="") == 1.0


def test_mlx5_capture_sums_retransmissions_and_errors_by_kind(tmp_path: Path) -> None:
    metrics = RdmaSource(str(build_fixture_tree(tmp_path, "procfs")), 60).collect(0.0)
    # local_ack_timeout_err 131 + packet_seq_err 1 + implied_nak_seq_err 0 + rnr_nak_retry_err 0;
    # roce_adp_retrans (99) is deliberately not added.
    assert value(metrics, "llm_rdma_port_retransmissions_total", "mlx5_0") == 132
    assert value(metrics, "llm_rdma_port_errors_total", "mlx5_0", kind="sequence") == 1 + 41
    assert value(metrics, "llm_rdma_port_errors_total", "mlx5_0", kind="completion") == 3481 + 80 + 8109 + 4708
    assert value(metrics, "llm_rdma_port_errors_total", "mlx5_0", kind="out_of_buffer") == 0
    # an IB-link-layer port has no congestion (np_*/rp_*) counters: the families are absent
    assert value(metrics, "llm_rdma_port_cnp_handled_total", "mlx5_0") is None
    # hfi1_0 has no hw_counters at all
    assert value(metrics, "llm_rdma_port_retransmissions_total", "hfi1_0") is None


def test_node_exporter_capture_flags_the_saturated_xmit_wait(tmp_path: Path) -> None:
    metrics = RdmaSource(str(build_fixture_tree(tmp_path, "node_exporter")), 60).collect(0.0)
    assert value(metrics, "llm_rdma_port_counter_saturated", "mlx4_0", 1, counter="port_xmit_wait") == 1.0
    assert value(metrics, "llm_rdma_port_transmit_wait_total", "mlx4_0", 1) == 4294967295
    assert value(metrics, "llm_rdma_port_counter_saturated", "mlx4_0", 2, counter="port_xmit_wait") is None
    # counters/ wins over counters_ext/ where both have the quantity (what node_exporter exports)
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx4_0", 1) == 3733440 * 4
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx4_0", 2) == 0
    # port 2 has no counters/port_*_packets: the legacy 64-bit ones stand in
    assert value(metrics, "llm_rdma_port_transmit_packets_total", "mlx4_0", 2) == 0
    assert value(metrics, "llm_rdma_port_receive_packets_total", "mlx4_0", 1) == 6825908347


def test_a_port_without_pma_keeps_its_link_series(tmp_path: Path) -> None:
    metrics = RdmaSource(str(build_fixture_tree(tmp_path, "node_exporter")), 60).collect(0.0)
    assert names_for(metrics, "i40iw0") == {
        "llm_rdma_port_info",
        "llm_rdma_port_up",
        "llm_rdma_port_link_rate_bytes_per_second",
    }
    assert value(metrics, "llm_rdma_port_link_rate_bytes_per_second", "i40iw0") == 1.25e9


def test_roce_port_congestion_retransmission_and_error_kinds(live: LiveTree) -> None:
    metrics = RdmaSource(str(live.root), 60, full_read_every=1).collect(0.0)
    assert value(metrics, "llm_rdma_port_cnp_handled_total", "mlx5_0") == 3400
    assert value(metrics, "llm_rdma_port_cnp_sent_total", "mlx5_0") == 1200
    assert value(metrics, "llm_rdma_port_ecn_marked_packets_total", "mlx5_0") == 5000
    assert value(metrics, "llm_rdma_port_retransmissions_total", "mlx5_0") == 11 + 13 + 17 + 19
    expected_kinds = {
        "link": 2,
        "receive": 3 + 47,
        "discard": 5,
        "buffer_overrun": 0,
        "out_of_buffer": 37,
        "sequence": 29 + 31,
        "completion": 41 + 43,
        "retry_exceeded": 2,
        "cnp_ignored": 7,
    }
    for kind, expected in expected_kinds.items():
        assert value(metrics, "llm_rdma_port_errors_total", "mlx5_0", kind=kind) == expected, kind
    assert value(metrics, "llm_rdma_port_info", "mlx5_0", link_layer="Ethernet", netdev="ens1f0np0") == 1.0


def test_soft_roce_packets_and_retransmissions_come_from_hw_counters(tmp_path: Path) -> None:
    write_port(
        tmp_path,
        "rxe0",
        rate="2.5 Gb/sec (1X SDR)",
        hw_counters={
            "sent_pkts": 1000,
            "rcvd_pkts": 900,
            "completer_retry_err": 4,
            "rcvd_rnr_err": 3,
            "rcvd_seq_err": 2,
            "duplicate_request": 6,
            "out_of_seq_request": 1,
            "retry_exceeded_err": 1,
            "send_rnr_err": 8,
        },
    )
    metrics = RdmaSource(str(tmp_path), 60, full_read_every=1).collect(0.0)
    assert value(metrics, "llm_rdma_port_transmit_packets_total", "rxe0") == 1000
    assert value(metrics, "llm_rdma_port_receive_packets_total", "rxe0") == 900
    assert value(metrics, "llm_rdma_port_retransmissions_total", "rxe0") == 4 + 3  # rcvd_seq_err leads into the retry
    assert value(metrics, "llm_rdma_port_errors_total", "rxe0", kind="sequence") == 6 + 1
    assert value(metrics, "llm_rdma_port_errors_total", "rxe0", kind="out_of_buffer") == 8
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "rxe0") is None  # rxe counts no bytes


# --- windows and utilization -------------------------------------------------------------------


def test_no_utilization_before_a_second_collection(live: LiveTree) -> None:
    metrics = RdmaSource(str(live.root), 60, full_read_every=1).collect(0.0)
    assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") is None


def test_steady_traffic_utilization_matches_the_arithmetic(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(100.0)
    for step in (1, 2, 3):
        # 5 s at 2 GB/s out and 12.5 GB/s in on a 25 GB/s (200 Gb/s) link; sysfs counts words.
        live.add("mlx5_0", "counters/port_xmit_data", 10_000_000_000 // 4)
        live.add("mlx5_0", "counters/port_rcv_data", 62_500_000_000 // 4)
        metrics = source.collect(100.0 + 5 * step)
        assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") == pytest.approx(0.08)
        assert value(metrics, "llm_rdma_port_receive_utilization_ratio", "mlx5_0") == pytest.approx(0.5)
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 1_000_000_000 + 3 * 10_000_000_000


def test_utilization_covers_only_the_window(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), window_seconds=5, full_read_every=1)
    source.collect(0.0)
    live.add("mlx5_0", "counters/port_xmit_data", 25_000_000_000 * 5 // 4)  # 5 s at line rate
    assert value(source.collect(5.0), "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") == pytest.approx(1.0)
    live.add("mlx5_0", "counters/port_xmit_data", 2_500_000_000 * 5 // 4)  # then 5 s at a tenth
    assert value(source.collect(10.0), "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") == pytest.approx(0.1)


def test_utilization_never_exceeds_one(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.add("mlx5_0", "counters/port_xmit_data", 25_000_000_000 * 5 // 4 + 1_000_000)
    assert value(source.collect(5.0), "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") == 1.0


# --- counter hygiene ---------------------------------------------------------------------------


def test_a_32_bit_hw_counter_wrap_is_an_increase_not_a_reset(live: LiveTree) -> None:
    live.set("mlx5_0", "hw_counters/local_ack_timeout_err", U32 - 6)
    live.set("mlx5_0", "hw_counters/out_of_buffer", U32 - 1)
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    before = source.collect(0.0)
    retrans_before = value(before, "llm_rdma_port_retransmissions_total", "mlx5_0")
    assert retrans_before == (U32 - 6) + 13 + 17 + 19
    live.set("mlx5_0", "hw_counters/local_ack_timeout_err", 5)  # advanced by 11 through the wrap
    live.set("mlx5_0", "hw_counters/out_of_buffer", 2)  # advanced by 3
    after = source.collect(5.0)
    assert value(after, "llm_rdma_port_retransmissions_total", "mlx5_0") == retrans_before + 11
    assert value(after, "llm_rdma_port_errors_total", "mlx5_0", kind="out_of_buffer") == (U32 - 1) + 3


def test_a_small_decrease_is_a_reset_not_a_wrap(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    before = value(source.collect(0.0), "llm_rdma_port_retransmissions_total", "mlx5_0")
    live.set("mlx5_0", "hw_counters/local_ack_timeout_err", 4)  # was 11: counters were cleared
    after = value(source.collect(5.0), "llm_rdma_port_retransmissions_total", "mlx5_0")
    assert after == before + 4


@given(st.integers(min_value=U32 // 2, max_value=U32 - 1), st.integers(min_value=1, max_value=U32 // 2 - 1))
def test_counter_increment_recovers_any_32_bit_wrap(previous: int, increment: int) -> None:
    current = (previous + increment) % U32
    if previous + increment >= U32:
        assert counter_increment(previous, current, wraps_at_32_bits=True) == increment


def test_a_64_bit_hw_counter_never_wraps_at_32_bits(tmp_path: Path) -> None:
    # rxe's duplicate_request is 64-bit: once seen above 2^32 a decrease is a reset.
    write_port(tmp_path, "rxe0", hw_counters={"duplicate_request": U32 + 10})
    tree = LiveTree(tmp_path)
    source = RdmaSource(str(tmp_path), 60, full_read_every=1)
    source.collect(0.0)
    tree.set("rxe0", "hw_counters/duplicate_request", U32 + 20)
    source.collect(5.0)
    tree.set("rxe0", "hw_counters/duplicate_request", 3)
    assert value(source.collect(10.0), "llm_rdma_port_errors_total", "rxe0", kind="sequence") == U32 + 20 + 3


def test_a_saturated_data_counter_is_flagged_and_not_a_rate(live: LiveTree) -> None:
    live.set("mlx5_0", "counters/port_xmit_data", U32 - 1)  # legacy 32-bit PMA, clamped
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.add("mlx5_0", "counters/port_rcv_data", 25_000_000_000 * 5 // 4 // 2)
    metrics = source.collect(5.0)
    assert value(metrics, "llm_rdma_port_counter_saturated", "mlx5_0", counter="port_xmit_data") == 1.0
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == (U32 - 1) * 4
    assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") is None
    assert value(metrics, "llm_rdma_port_receive_utilization_ratio", "mlx5_0") == pytest.approx(0.5)


def test_a_saturated_legacy_data_counter_gives_way_to_counters_ext(live: LiveTree) -> None:
    live.set("mlx5_0", "counters/port_xmit_data", U32 - 1)
    live.set("mlx5_0", "counters_ext/port_xmit_data_64", 6_000_000_000)
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    assert value(source.collect(0.0), "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 24_000_000_000
    live.add("mlx5_0", "counters_ext/port_xmit_data_64", 25_000_000_000 * 5 // 4 // 4)
    metrics = source.collect(5.0)
    assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") == pytest.approx(0.25)
    assert value(metrics, "llm_rdma_port_counter_saturated", "mlx5_0", counter="port_xmit_data") == 1.0


def test_a_saturated_error_counter_is_flagged_and_its_kind_stays_monotonic(live: LiveTree) -> None:
    live.set("mlx5_0", "counters/symbol_error", 65535)  # 16-bit PMA counter at its maximum
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    first = source.collect(0.0)
    assert value(first, "llm_rdma_port_counter_saturated", "mlx5_0", counter="symbol_error") == 1.0
    assert value(first, "llm_rdma_port_errors_total", "mlx5_0", kind="link") == 65535
    live.set("mlx5_0", "counters/link_downed", 1)
    assert value(source.collect(5.0), "llm_rdma_port_errors_total", "mlx5_0", kind="link") == 65536


# --- ports and files that change under us ------------------------------------------------------


def test_a_port_going_down_reports_up_0_and_no_utilization(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.set("mlx5_0", "state", "1: DOWN")
    live.set("mlx5_0", "phys_state", "3: Disabled")
    metrics = source.collect(5.0)
    assert value(metrics, "llm_rdma_port_up", "mlx5_0") == 0.0
    assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") is None
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 1_000_000_000
    assert value(metrics, "llm_rdma_port_cnp_handled_total", "mlx5_0") == 3400


def test_a_device_disappearing_leaves_the_others_exported(tmp_path: Path) -> None:
    tree = two_port_tree(tmp_path)
    source = RdmaSource(str(tmp_path), 60, full_read_every=1)
    assert value(source.collect(0.0), "llm_rdma_port_up", "mlx5_1") == 1.0
    tree.remove_device("mlx5_1")
    metrics = source.collect(5.0)
    assert names_for(metrics, "mlx5_1") == set()
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 1_000_000_000
    assert value(metrics, "llm_rdma_port_retransmissions_total", "mlx5_0") == 60


def test_a_file_becoming_unreadable_omits_only_that_counter(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.make_unreadable("mlx5_0", "counters/port_xmit_data")
    live.make_unreadable("mlx5_0", "hw_counters/local_ack_timeout_err")
    live.add("mlx5_0", "counters/port_rcv_data", 12_500_000_000 * 5 // 4)
    metrics = source.collect(5.0)
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") is None
    assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") is None
    assert value(metrics, "llm_rdma_port_receive_utilization_ratio", "mlx5_0") == pytest.approx(0.5)
    assert value(metrics, "llm_rdma_port_retransmissions_total", "mlx5_0") == 60  # the sum does not drop
    assert value(metrics, "llm_rdma_port_cnp_sent_total", "mlx5_0") == 1200


def test_a_counter_readable_again_adds_its_increase_over_the_gap(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.make_unreadable("mlx5_0", "counters/port_xmit_data")
    live.make_unreadable("mlx5_0", "hw_counters/local_ack_timeout_err")
    source.collect(5.0)
    (live.port_dir("mlx5_0") / "counters/port_xmit_data").rmdir()
    (live.port_dir("mlx5_0") / "hw_counters/local_ack_timeout_err").rmdir()
    live.set("mlx5_0", "counters/port_xmit_data", 250_000_000 + 25_000_000_000 * 10 // 4 // 5)
    live.set("mlx5_0", "hw_counters/local_ack_timeout_err", 11 + 9)
    metrics = source.collect(10.0)
    # 10 s at a fifth of the line rate, measured across the unreadable collection
    assert value(metrics, "llm_rdma_port_transmit_utilization_ratio", "mlx5_0") == pytest.approx(0.2)
    assert value(metrics, "llm_rdma_port_retransmissions_total", "mlx5_0") == 60 + 9


def test_the_class_directory_vanishing_is_a_source_error(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.remove_device("mlx5_0")
    (live.root / "class/infiniband").rmdir()
    with pytest.raises(SourceError) as error:
        source.collect(5.0)
    assert error.value.reason == "no_data"


def test_every_sample_is_in_the_catalogue_with_its_labels(live: LiveTree) -> None:
    from exporter.catalogue import CATALOGUE

    source = RdmaSource(str(live.root), 60, full_read_every=1)
    source.collect(0.0)
    live.add("mlx5_0", "counters/port_xmit_data", 1000)
    live.set("mlx5_0", "counters/symbol_error", 65535)
    metrics = source.collect(5.0)
    assert {m.name for m in metrics} >= {"llm_rdma_port_transmit_utilization_ratio", "llm_rdma_port_counter_saturated"}
    for metric in metrics:
        assert set(metric.labels) == set(CATALOGUE[metric.name].labels), metric.name


# --- registry ----------------------------------------------------------------------------------


def test_registry_builds_the_rdma_source_only_when_the_class_directory_exists(tmp_path: Path) -> None:
    absent = build_pipeline(Config(gpu=GpuSettings("none"), sysfs=str(tmp_path))).sources
    assert "rdma" not in [s.name for s in absent]
    roce_mlx5_tree(tmp_path)
    present = build_pipeline(Config(gpu=GpuSettings("none"), sysfs=str(tmp_path))).sources
    assert [s.name for s in present].count("rdma") == 1


def test_no_counter_feeds_two_sums() -> None:
    # Each sum advances its components' last-seen values: a file in two sums would count once.
    from exporter.sources.rdma import ERROR_KINDS, RETRANSMISSION_COUNTERS

    components = [("hw_counters", n) for n in RETRANSMISSION_COUNTERS]
    components += [c for kind in ERROR_KINDS.values() for c in kind]
    assert len(components) == len(set(components))


# --- read cadence: every file every few collections, the fast-moving ones in between ------------


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names `exporter.sysfs.infiniband` asks os.open for (a name within a directory, or a path)."""
    import exporter.sysfs.infiniband as reader

    names: list[str] = []
    real_open = reader.os.open

    def recording_open(path: str, flags: int, *args: object, **kwargs: object) -> int:
        names.append(os.path.basename(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader.os, "open", recording_open)
    return names


def test_between_full_reads_only_the_fast_files_the_port_has_are_opened(
    live: LiveTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporter.sources.rdma_counters import ERROR_KINDS, FAST_FILES

    source = RdmaSource(str(live.root), 60, full_read_every=4)
    opened = _opened(monkeypatch)
    source.collect(0.0)
    full = set(opened)
    assert {"symbol_error", "out_of_buffer", "rate", "link_layer"} <= full
    assert not {"phys_state", "fw_ver", "board_id", "hca_type"} & full  # read, never mapped
    opened.clear()
    source.collect(5.0)
    fast_names = {name for names in FAST_FILES.values() for name in names}
    has = set(ROCE_COUNTERS) | set(ROCE_HW_COUNTERS)
    assert set(opened) <= (fast_names & has) | {"state", "counters", "hw_counters"}, set(opened)
    assert {"port_xmit_data", "port_xmit_wait", "np_cnp_sent", "local_ack_timeout_err", "state"} <= set(opened)
    error_names = {name for kind in ERROR_KINDS.values() for _, name in kind} - fast_names
    assert not error_names & set(opened)
    assert len(opened) < len(full) / 2, (len(opened), len(full))
    opened.clear()
    source.collect(10.0)
    source.collect(15.0)
    opened.clear()
    source.collect(20.0)  # the fourth collection after the first full read is full again
    assert set(opened) == full


def test_traffic_moves_every_collection_and_errors_at_the_next_full_read(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=4)
    first = source.collect(0.0)
    link_errors = value(first, "llm_rdma_port_errors_total", "mlx5_0", kind="link")
    assert link_errors is not None
    live.add("mlx5_0", "counters/symbol_error", 7)
    for step in (1, 2, 3):
        live.add("mlx5_0", "counters/port_xmit_data", 1000)
        live.add("mlx5_0", "hw_counters/local_ack_timeout_err", 2)
        metrics = source.collect(5.0 * step)
        assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 1_000_000_000 + 4000 * step
        assert value(metrics, "llm_rdma_port_retransmissions_total", "mlx5_0") == 60 + 2 * step
        assert value(metrics, "llm_rdma_port_errors_total", "mlx5_0", kind="link") == link_errors
        assert value(metrics, "llm_rdma_port_up", "mlx5_0") == 1.0
        assert value(metrics, "llm_rdma_port_link_rate_bytes_per_second", "mlx5_0") == 25e9
    metrics = source.collect(20.0)
    assert value(metrics, "llm_rdma_port_errors_total", "mlx5_0", kind="link") == link_errors + 7


@pytest.mark.parametrize("seed", range(6))
def test_each_full_read_agrees_with_a_source_that_reads_every_file_every_time(tmp_path: Path, seed: int) -> None:
    """Counters advancing at random (through a 32-bit wrap too): at every full read the two
    sources export the same series, and in between the same fast-moving ones."""
    import random

    from exporter.sources.rdma import FULL_READ_EVERY
    from exporter.sources.rdma_counters import ERROR_KINDS, FAST_FILES

    ERROR_KINDS_FILES = [c for kind in ERROR_KINDS.values() for c in kind]
    tree = two_port_tree(tmp_path)
    tree.set("mlx5_1", "hw_counters/out_of_sequence", U32 - 50)
    every, cadenced = RdmaSource(str(tmp_path), 30, full_read_every=1), RdmaSource(str(tmp_path), 30)
    has = {("counters", n) for n in ROCE_COUNTERS} | {("hw_counters", n) for n in ROCE_HW_COUNTERS}
    files = sorted(({(d, n) for d, names in FAST_FILES.items() for n in names} | set(ERROR_KINDS_FILES)) & has)
    rng = random.Random(seed)
    fast_families = {
        "llm_rdma_port_transmit_bytes_total",
        "llm_rdma_port_transmit_utilization_ratio",
        "llm_rdma_port_retransmissions_total",
        "llm_rdma_port_cnp_sent_total",
        "llm_rdma_port_transmit_wait_total",
        "llm_rdma_port_up",
    }
    for index in range(3 * FULL_READ_EVERY + 1):
        for _ in range(rng.randint(1, 6)):
            directory, name = rng.choice(files)
            device = rng.choice(["mlx5_0", "mlx5_1"])
            path = tree.port_dir(device) / directory / name
            current = int(path.read_text())
            wraps = name == "out_of_sequence" and current >= U32 - 100
            tree.set(device, f"{directory}/{name}", (current + 60) % U32 if wraps else current + rng.randint(1, 9))
        now = 5.0 * index
        reference, read = series(every.collect(now)), series(cadenced.collect(now))
        if index % FULL_READ_EVERY == 0:
            assert read == reference, index
        else:
            assert {k: v for k, v in read.items() if k[0] in fast_families} == {
                k: v for k, v in reference.items() if k[0] in fast_families
            }, index


def test_a_port_gone_between_full_reads_is_gone_at_once_and_a_new_one_waits_for_the_next(tmp_path: Path) -> None:
    tree = two_port_tree(tmp_path)
    source = RdmaSource(str(tmp_path), 60, full_read_every=4)
    assert value(source.collect(0.0), "llm_rdma_port_up", "mlx5_1") == 1.0
    tree.remove_device("mlx5_1")
    write_port(tmp_path, "mlx5_2", counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev="ens2f0np0")
    for step in (1, 2, 3):
        metrics = source.collect(5.0 * step)
        assert names_for(metrics, "mlx5_1") == set()
        assert names_for(metrics, "mlx5_2") == set()
        assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 1_000_000_000
    assert value(source.collect(20.0), "llm_rdma_port_up", "mlx5_2") == 1.0


def test_a_fast_file_unreadable_between_full_reads_is_absent_not_its_old_value(live: LiveTree) -> None:
    source = RdmaSource(str(live.root), 60, full_read_every=4)
    source.collect(0.0)
    live.make_unreadable("mlx5_0", "counters/port_xmit_data")
    live.set("mlx5_0", "state", "1: DOWN")
    metrics = source.collect(5.0)
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") is None
    assert value(metrics, "llm_rdma_port_up", "mlx5_0") == 0.0
    (live.port_dir("mlx5_0") / "counters/port_xmit_data").rmdir()
    live.set("mlx5_0", "counters/port_xmit_data", 250_000_000 + 100)
    metrics = source.collect(10.0)
    assert value(metrics, "llm_rdma_port_transmit_bytes_total", "mlx5_0") == 1_000_000_000 + 400


def test_the_help_text_and_the_docs_say_how_often_errors_are_read() -> None:
    from exporter.catalogue import CATALOGUE
    from exporter.sources.rdma import FULL_READ_EVERY

    assert f"every {FULL_READ_EVERY}th collection" in CATALOGUE["llm_rdma_port_errors_total"].help
    docs = (Path(__file__).resolve().parents[2] / "docs" / "rdma-and-host.md").read_text(encoding="utf-8")
    assert f"every {FULL_READ_EVERY}th collection" in docs


@given(
    window=st.floats(1, 120),
    steps=st.lists(st.tuples(st.floats(0.01, 40), st.integers(0, 10**12)), min_size=1, max_size=60),
)
def test_the_rate_window_gives_what_a_delta_window_with_the_clock_beside_it_gives(
    window: float, steps: list[tuple[float, int]]
) -> None:
    from exporter.window import DeltaWindow, RateWindow

    rate_window, reference = RateWindow(window), DeltaWindow(window)
    now, value = 1000.0, 0.0
    for gap, increment in steps:
        now, value = now + gap, value + increment
        rate = rate_window.observe(now, value)
        reference.observe(now, (now, value))
        totals = reference.total()
        expected = None if totals is None or totals[0] <= 0 else totals[1] / totals[0]
        if expected is None:
            assert rate is None
        else:
            assert rate == pytest.approx(expected, rel=1e-9, abs=1e-6)
