"""Ingest a vendor's own device exporter (AMD device-metrics-exporter, Huawei npu-exporter, Intel
Gaudi metric exporter): scrape its text exposition and map it to the same `llm_gpu_*` families the
NVIDIA sources fill, with `vendor` set.

Each vendor module declares one `DeviceExporterSpec` (which wire names become which family and
scale, which labels name the device, its partition and its pod); this module knows the text format,
bounds and attribution, and nothing of any vendor. A signal the vendor does not export stays absent:
nothing is derived that the exporter did not measure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.attribution import Attributor, GpuRef, PodContainer
from exporter.model import Metric
from exporter.promtext import LabelKey, ParsedSamples, WantedParser, parse_wanted
from exporter.sources.base import Source, SourceError
from exporter.sources.gpu_common import GpuReading, Scale, attributed_samples, scaled
from exporter.sources.http_fetch import HttpClient, feed_parser, open_body, redact

#: label values that mean "not set" in these exporters (AMD writes "NA" and "none" for an
#: unpartitioned GPU, "N/A" for an unknown serial; Gaudi's exporter writes "na" for a UUID HLML
#: could not read, HabanaAI/gaudi-metric-exporter `rhlml/src/lib.rs`)
UNSET = frozenset({"", "NA", "N/A", "na", "none"})


@dataclass(frozen=True)
class LabelledFamily:
    """A wire metric that becomes a family with a label of its own (`severity`, `link`); several
    wire series of one device (one per XGMI link) are summed into one sample."""

    family: str
    scale: Scale
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DeviceExporterSpec:
    """What one vendor's exporter says, in our terms."""

    vendor: str
    #: wire name → (family, scale); several names may feed one family, the first present wins
    metrics: Mapping[str, tuple[str, Scale]]
    #: wire labels naming the device index, its stable id and its model, first non-empty wins
    index_labels: tuple[str, ...]
    uuid_labels: tuple[str, ...] = ()
    model_labels: tuple[str, ...] = ()
    #: wire label → our label for the device's own id labels kept on every series (partitions, bus)
    id_labels: Mapping[str, str] = field(default_factory=dict)
    #: wire labels of the pod holding the device: (namespace, pod, container) candidates
    pod_labels: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ())
    #: wire labels whose values are the IDs the vendor's device plugin gives the kubelet, so the
    #: pod-resources answer can name the device's pod when the exporter's own pod labels are empty
    device_id_labels: tuple[str, ...] = ()
    #: wire name → a family with its own label, summed over the device's series
    labelled: Mapping[str, LabelledFamily] = field(default_factory=dict)
    #: wire names of the device's health flag; `healthy_values` of it read as 1, anything else 0
    health: tuple[str, ...] = ()
    healthy_values: frozenset[float] = frozenset({1.0})
    #: values the exporter writes for a reading it could not take (Ascend's -1): dropped, so the
    #: family stays absent rather than reading as a temperature of -1 or an unhealthy chip
    failed_values: frozenset[float] = frozenset()
    #: wire names not mapped but present on every device: they still show it exists
    presence: tuple[str, ...] = ()
    #: prefixes an exporter may be configured to put before every name (AMD's MetricsFieldPrefix)
    optional_prefixes: tuple[str, ...] = ()

    def names(self) -> frozenset[str]:
        """Every wire name this spec reads, unprefixed."""
        return frozenset({*self.metrics, *self.labelled, *self.health, *self.presence})

    def wanted(self) -> frozenset[str]:
        names = self.names()
        return names | {prefix + name for prefix in self.optional_prefixes for name in names}

    def unprefixed(self, name: str) -> str:
        for prefix in self.optional_prefixes:
            if name.startswith(prefix) and name[len(prefix) :] in self.names():
                return name[len(prefix) :]
        return name


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = labels.get(name, "")
        if value not in UNSET:
            return value
    return ""


DeviceKey = tuple[str, ...]


def readings_from_text(
    spec: DeviceExporterSpec, text: str, max_series: int | None = None
) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
    """One reading per device (or partition) in the exporter's payload, with the pods it reports."""
    return readings_from_parsed(spec, parse_wanted(text, spec.wanted(), max_series))


def readings_from_parsed(
    spec: DeviceExporterSpec, parsed: ParsedSamples
) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
    """`readings_from_text` of a payload already parsed for `spec.wanted()`."""
    readings: dict[DeviceKey, GpuReading] = {}
    owners: dict[DeviceKey, set[PodContainer]] = {}
    sums: dict[DeviceKey, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    order = {name: rank for rank, name in enumerate(spec.metrics)}

    def reading_for(label_key: LabelKey) -> DeviceKey | None:
        labels = dict(label_key)
        index = _first(labels, spec.index_labels)
        if not index:
            return None
        ids = {ours: labels[wire] for wire, ours in spec.id_labels.items() if labels.get(wire, "") not in UNSET}
        key = (index, *(f"{k}={v}" for k, v in sorted(ids.items())))
        if key not in readings:
            reading = GpuReading(index, _first(labels, spec.uuid_labels), _first(labels, spec.model_labels))
            reading.vendor = spec.vendor
            reading.labels.update(ids)
            reading.device_ids = tuple(labels[n] for n in spec.device_id_labels if labels.get(n, "") not in UNSET)
            readings[key], owners[key], sums[key] = reading, set(), {}
        namespace, pod, container = (_first(labels, names) for names in spec.pod_labels)
        if pod:
            owners[key].add(PodContainer(namespace, pod, container))
        return key

    # Wire names in the spec's order, so the first name listed for a family wins over later ones.
    for name in sorted(parsed, key=lambda n: order.get(spec.unprefixed(n), len(order))):
        bare = spec.unprefixed(name)
        for label_key, value in parsed[name].items():
            key = reading_for(label_key)
            if key is None or value != value or value in spec.failed_values:
                continue
            reading = readings[key]
            if bare in spec.metrics:
                family, scale = spec.metrics[bare]
                if family not in reading.values:
                    reading.set(family, scaled(value, scale))
            elif bare in spec.labelled:
                target = spec.labelled[bare]
                slot = (target.family, target.labels)
                sums[key][slot] = sums[key].get(slot, 0.0) + scaled(value, target.scale)
            elif bare in spec.health:
                reading.set("llm_gpu_healthy", 1.0 if value in spec.healthy_values else 0.0)
    for key, reading in readings.items():
        for (family, own), total in sorted(sums[key].items()):
            reading.labelled.append((family, dict(own), total))
    ordered = sorted(readings, key=_device_order)
    return [readings[k] for k in ordered], [frozenset(owners[k]) for k in ordered]


def _device_order(key: DeviceKey) -> tuple[tuple[int, str], ...]:
    return tuple((int(part), "") if part.isdigit() else (1 << 30, part) for part in key)


class ExporterIngest(Source):
    """Scrape another exporter's /metrics (bounded: deadline, byte cap, series cap; parsed as it
    streams in) and render the readings `readings` finds; shared by the dcgm-exporter ingest and
    the vendors' exporters."""

    def __init__(
        self,
        url: str,
        attributor: Attributor | None = None,
        timeout_seconds: float = 5.0,
        max_response_bytes: int = 16 * 1024 * 1024,
        max_series: int = 20_000,
    ) -> None:
        self.url = url
        #: the URL as labels and messages may show it (no query values: a key may be one)
        self.target = redact(url)
        self.timeout_seconds = timeout_seconds
        self._attributor = attributor
        self._max_response_bytes = max_response_bytes
        self._max_series = max_series
        self._client = HttpClient()  # redirects within the origin only: elsewhere is another host's devices

    def wanted(self) -> frozenset[str]:
        """The wire names `readings` reads."""
        raise NotImplementedError

    def readings(self, parsed: ParsedSamples) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
        """The readings in one parsed payload, each with the pods the exporter names for it."""
        raise NotImplementedError

    async def collect(self, now: float) -> list[Metric]:
        parser = WantedParser(self.wanted(), self._max_series)
        async with open_body(self._client, self.url, self.timeout_seconds, self._max_response_bytes) as body:
            await feed_parser(body, parser, self.target)
        readings, owners = self.readings(parser.result)
        if not readings:
            raise SourceError("parse", f"{self.target}: no {self.name} GPU metrics in the response")
        refs = [GpuRef(r.index, r.uuid, owners=pods, device_ids=r.device_ids) for r, pods in zip(readings, owners)]
        return attributed_samples(readings, refs, self._attributor)

    def close(self) -> None:
        self._client.close()


class DeviceExporterSource(ExporterIngest):
    """A vendor's exporter, read through its spec."""

    spec: DeviceExporterSpec

    def wanted(self) -> frozenset[str]:
        return self.spec.wanted()

    def readings(self, parsed: ParsedSamples) -> tuple[list[GpuReading], list[frozenset[PodContainer]]]:
        return readings_from_parsed(self.spec, parsed)
