"""A client of the kubelet pod-resources API v1 (`PodResourcesLister.List`) on its Unix socket.

The messages are built at import from a descriptor of the part of
`k8s.io/kubelet/pkg/apis/podresources/v1/api.proto` we read (pod → containers → devices), instead
of committing protoc output: generated code pins the protobuf runtime version, a descriptor does
not. Fields we do not declare (topology, cpu_ids, memory, dynamic_resources) are skipped by the
parser as unknown fields, as protobuf intends. grpcio and protobuf are imported lazily so a node
without them only loses this one attribution method.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

LIST_METHOD = "/v1.PodResourcesLister/List"
# Device plugins that hand out NVIDIA GPUs: whole GPUs, MIG slices (`nvidia.com/mig-1g.10gb`) and
# renamed shared resources (`nvidia.com/gpu.shared` with time-slicing); AMD's (`amd.com/gpu`, device
# IDs are PCI addresses), Huawei's (`huawei.com/Ascend910`, IDs `Ascend910-N`) and Intel's Gaudi
# (`habana.ai/gaudi`).
GPU_RESOURCE_PREFIXES = ("nvidia.com/", "amd.com/", "huawei.com/", "habana.ai/")
# The largest List answer accepted. A node's answer is a few KB per pod (devices, CPU ids, memory
# blocks) and a node runs at most a few hundred pods; gRPC's own default (4 MiB) is stated here
# rather than inherited, and lowered, so a runaway kubelet (or whatever holds the socket) cannot
# make the exporter hold more.
MAX_RESPONSE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, order=True)
class PodContainer:
    namespace: str
    pod: str
    container: str


def _message_classes() -> tuple[Any, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="llm_exporter/podresources_v1.proto", package="v1", syntax="proto3")

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        msg = proto.message_type.add(name=name)
        for field_name, number, type_, label, type_name in fields:
            entry = msg.field.add(name=field_name, number=number, type=type_, label=label)
            if type_name:
                entry.type_name = type_name

    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("ListPodResourcesRequest")
    message("ListPodResourcesResponse", ("pod_resources", 1, F.TYPE_MESSAGE, many, ".v1.PodResources"))
    message(
        "PodResources",
        ("name", 1, F.TYPE_STRING, one, ""),
        ("namespace", 2, F.TYPE_STRING, one, ""),
        ("containers", 3, F.TYPE_MESSAGE, many, ".v1.ContainerResources"),
    )
    message(
        "ContainerResources",
        ("name", 1, F.TYPE_STRING, one, ""),
        ("devices", 2, F.TYPE_MESSAGE, many, ".v1.ContainerDevices"),
    )
    message(
        "ContainerDevices",
        ("resource_name", 1, F.TYPE_STRING, one, ""),
        ("device_ids", 2, F.TYPE_STRING, many, ""),
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    request = message_factory.GetMessageClass(pool.FindMessageTypeByName("v1.ListPodResourcesRequest"))
    response = message_factory.GetMessageClass(pool.FindMessageTypeByName("v1.ListPodResourcesResponse"))
    return request, response


def gpu_devices(response: Any) -> dict[str, set[PodContainer]]:
    """Device ID → the containers it is assigned to, for accelerator resources only.

    Shared GPUs appear once per sharing pod, with IDs such as `GPU-…::2` (time-slicing replicas):
    the suffix is dropped so each maps back to its physical GPU.
    """
    owners: dict[str, set[PodContainer]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for device in container.devices:
                if not device.resource_name.startswith(GPU_RESOURCE_PREFIXES):
                    continue
                for device_id in device.device_ids:
                    key = device_id.split("::", 1)[0]
                    owners.setdefault(key, set()).add(PodContainer(pod.namespace, pod.name, container.name))
    return owners


class PodResourcesClient:
    """`List()` over a Unix socket; raises `PodResourcesError` on any failure."""

    def __init__(self, socket_path: str, timeout_seconds: float = 5.0) -> None:
        self.socket_path = socket_path
        self.timeout_seconds = timeout_seconds
        self._channel: Any = None
        self._call: Any = None

    def available(self) -> bool:
        return bool(self.socket_path) and os.path.exists(self.socket_path)

    def list_gpu_devices(self) -> dict[str, set[PodContainer]]:
        try:
            import grpc
        except ImportError as exc:
            raise PodResourcesError("grpcio is not installed") from exc
        if self._call is None:
            request_class, response_class = _message_classes()
            # A new channel per client, not per call: gRPC reconnects it after a kubelet restart,
            # which recreates the socket (hence mounting the directory, not the file).
            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path}", options=[("grpc.max_receive_message_length", MAX_RESPONSE_BYTES)]
            )
            self._call = self._channel.unary_unary(
                LIST_METHOD,
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=response_class.FromString,
            )
            self._request = request_class()
        try:
            # `timeout` is gRPC's deadline for the whole call, connection and answer included.
            response = self._call(self._request, timeout=self.timeout_seconds)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise PodResourcesError(f"List on {self.socket_path}: {code} {details}") from exc
        return gpu_devices(response)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = self._call = None


class PodResourcesError(Exception):
    pass
