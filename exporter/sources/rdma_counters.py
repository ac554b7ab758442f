"""What the RDMA source reads and how its families are made of the kernel's counter files.

The counter tables of `exporter.sources.rdma`, apart from its logic: the widths the kernel declares
for PMA counters, the mlx5 hw_counters that wrap at 32 bits, which counters make up each family
and error kind, and from them the files the reader opens at all (`WANTED_FILES`).
"""

from __future__ import annotations

#: Widths of the IBA PMA PortCounters as the kernel declares them (`PORT_PMA_ATTR` in
#: drivers/infiniband/core/sysfs.c). Data and packet counters are 32-bit only on legacy PMAs
#: (64-bit with PortCountersExtended), so for them only 2^32-1 itself means saturated.
PMA_COUNTER_WIDTHS = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
    "port_xmit_wait": 32,
    "port_xmit_data": 32,
    "port_rcv_data": 32,
    "port_xmit_packets": 32,
    "port_rcv_packets": 32,
}

#: mlx5 hw_counters read from 32-bit queue-counter fields (`mlx5_ib_query_q_counters`): they wrap.
#: The congestion counters (np_*, rp_*) and rx_icrc_encapsulated are 64-bit and are not here.
MLX5_WRAPPING_HW_COUNTERS = frozenset(
    {
        "rx_write_requests",
        "rx_read_requests",
        "rx_atomic_requests",
        "rx_dct_connect",
        "out_of_buffer",
        "out_of_sequence",
        "duplicate_request",
        "rnr_nak_retry_err",
        "packet_seq_err",
        "implied_nak_seq_err",
        "local_ack_timeout_err",
        "resp_local_length_error",
        "resp_cqe_error",
        "req_cqe_error",
        "req_remote_invalid_request",
        "req_remote_access_errors",
        "resp_remote_access_errors",
        "resp_cqe_flush_error",
        "req_cqe_flush_error",
        "req_transport_retries_exceeded",
        "req_rnr_retries_exceeded",
        "roce_adp_retrans",
        "roce_adp_retrans_to",
        "roce_slow_restart",
        "roce_slow_restart_cnps",
        "roce_slow_restart_trans",
    }
)

#: Components of `llm_rdma_port_retransmissions_total`: times THIS port's requester sent packets
#: again, whatever the driver. Only requester-side counters, so a loss between two monitored nodes
#: counts once in a cluster-wide sum rather than once per end.
#: - mlx5 `local_ack_timeout_err`: the ack timer expired, the requester retransmits (loss on the
#:   path, or the ack was lost); `packet_seq_err`: a NAK-sequence-error came back, the requester
#:   goes back N; `implied_nak_seq_err`: READ responses inferred lost and requested again;
#:   `rnr_nak_retry_err`: RNR NAK received, the request is resent after the RNR timer.
#: - rxe `completer_retry_err`: every retry of the completer (timeouts and sequence NAKs; its
#:   `rcvd_seq_err` leads into the same retry, so it is not added again); `rcvd_rnr_err`: RNR NAKs,
#:   retried on their own path.
#: Left out on purpose: `roce_adp_retrans` — adaptive retransmission only changes the ack-timeout
#: value, so those retries are ack timeouts already counted above (the mlx5 documentation does not
#: say whether the firmware counts them in both; we prefer undercounting to double counting);
#: responder-side `out_of_sequence` / `duplicate_request` — the peer's retransmissions, counted
#: by the peer (they go to errors{kind="sequence"}).
RETRANSMISSION_COUNTERS = (
    "local_ack_timeout_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "rnr_nak_retry_err",
    "completer_retry_err",
    "rcvd_rnr_err",
)

#: `llm_rdma_port_errors_total{kind}`: (directory, file) components summed into each kind. Kinds
#: group counters by what an operator does about them, keeping the series count fixed:
#: - link: the physical link is unstable (cable, optics, signal integrity);
#: - receive: packets arrived malformed or undeliverable (incl. RoCE ICRC errors);
#: - discard: packets the port dropped (port down, congestion, filtering);
#: - buffer_overrun: receive buffer overrun, flow-control misconfiguration or a very poor link;
#: - out_of_buffer: a message arrived with no receive WQE posted — host/application starvation,
#:   not the fabric (mlx5 out_of_buffer; rxe answers with an RNR NAK, send_rnr_err);
#: - sequence: the responder saw loss or duplicates — evidence of the peer's retransmissions;
#: - completion: work requests completed in error or flushed (QP errors, access/length errors);
#: - retry_exceeded: retries ran out and the QP went to error — connections are failing;
#: - cnp_ignored: CNPs arrived but congestion control is off (rp_cnp_ignored should stay 0).
#: Traffic counters (rx_*_requests, sent_pkts, rdma_sends, ...) and congestion-control state
#: (roce_slow_restart*, roce_adp_retrans_to) are not errors and are not exported in a kind.
ERROR_KINDS: dict[str, tuple[tuple[str, str], ...]] = {
    "link": (
        ("counters", "symbol_error"),
        ("counters", "link_error_recovery"),
        ("counters", "link_downed"),
        ("counters", "local_link_integrity_errors"),
        ("hw_counters", "link_downed"),
    ),
    "receive": (
        ("counters", "port_rcv_errors"),
        ("counters", "port_rcv_remote_physical_errors"),
        ("counters", "port_rcv_switch_relay_errors"),
        ("counters", "port_rcv_constraint_errors"),
        ("hw_counters", "rx_icrc_encapsulated"),
    ),
    "discard": (
        ("counters", "port_xmit_discards"),
        ("counters", "port_rcv_discards"),
        ("counters", "port_xmit_constraint_errors"),
        ("counters", "VL15_dropped"),
    ),
    "buffer_overrun": (("counters", "excessive_buffer_overrun_errors"),),
    "out_of_buffer": (("hw_counters", "out_of_buffer"), ("hw_counters", "send_rnr_err")),
    "sequence": (
        ("hw_counters", "out_of_sequence"),
        ("hw_counters", "duplicate_request"),
        ("hw_counters", "out_of_seq_request"),
    ),
    "completion": tuple(
        ("hw_counters", name)
        for name in (
            "req_cqe_error",
            "resp_cqe_error",
            "req_cqe_flush_error",
            "resp_cqe_flush_error",
            "resp_local_length_error",
            "req_remote_invalid_request",
            "req_remote_access_errors",
            "resp_remote_access_errors",
            "send_err",
        )
    ),
    "retry_exceeded": tuple(
        ("hw_counters", name)
        for name in (
            "req_transport_retries_exceeded",
            "req_rnr_retries_exceeded",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
        )
    ),
    "cnp_ignored": (("hw_counters", "rp_cnp_ignored"),),
}

# (family, hw_counters file) exported one to one; all 64-bit congestion counters.
CONGESTION = (
    ("llm_rdma_port_cnp_handled_total", "rp_cnp_handled"),
    ("llm_rdma_port_cnp_sent_total", "np_cnp_sent"),
    ("llm_rdma_port_ecn_marked_packets_total", "np_ecn_marked_roce_packets"),
)
# family -> where the value may come from, in order of preference
TRAFFIC = {
    "llm_rdma_port_transmit_bytes_total": (("counters", "port_xmit_data"), ("counters_ext", "port_xmit_data_64")),
    "llm_rdma_port_receive_bytes_total": (("counters", "port_rcv_data"), ("counters_ext", "port_rcv_data_64")),
    "llm_rdma_port_transmit_packets_total": (
        ("counters", "port_xmit_packets"),
        ("counters_ext", "port_xmit_packets_64"),
        ("hw_counters", "sent_pkts"),
    ),
    "llm_rdma_port_receive_packets_total": (
        ("counters", "port_rcv_packets"),
        ("counters_ext", "port_rcv_packets_64"),
        ("hw_counters", "rcvd_pkts"),
    ),
}
UTILIZATION = (
    ("llm_rdma_port_transmit_utilization_ratio", "llm_rdma_port_transmit_bytes_total"),
    ("llm_rdma_port_receive_utilization_ratio", "llm_rdma_port_receive_bytes_total"),
)


def _by_directory(components: list[tuple[str, str]]) -> dict[str, frozenset[str]]:
    wanted: dict[str, set[str]] = {directory: set() for directory in ("counters", "counters_ext", "hw_counters")}
    for directory, name in components:
        wanted[directory].add(name)
    return {directory: frozenset(names) for directory, names in wanted.items()}


#: The counter files read on every collection: what moves from second to second and feeds the
#: diagnosis' rates (traffic and utilization, transmit wait, congestion, retransmissions).
FAST_FILES = _by_directory(
    [c for sources in TRAFFIC.values() for c in sources]
    + [("counters", "port_xmit_wait")]
    + [("hw_counters", name) for _, name in CONGESTION]
    + [("hw_counters", name) for name in RETRANSMISSION_COUNTERS]
)

#: Every counter file the mapping reads, by directory: the rest are not read at all. The ones not
#: in `FAST_FILES` (error counters, the other PMA counters' saturation) are read every few
#: collections only.
WANTED_FILES = _by_directory(
    [c for kind in ERROR_KINDS.values() for c in kind]
    + [(directory, name) for directory, names in FAST_FILES.items() for name in names]
    + [("counters", name) for name in PMA_COUNTER_WIDTHS]
)
