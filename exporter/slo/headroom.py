"""Capacity headroom: the largest request rate an engine can take at its current request mix while
every dimension of an SLO still meets its objective.

Four pieces, each from what the engine (and its GPUs) show:
- decode pace vs batch: a memory-bandwidth-bound step reads the weights once and each running
  request's KV, so the objective quantile of inter-token latency grows linearly with the running
  batch b: ITL(b) = a + c·b. `a` and `c` are fitted on the engine's own history of (b, ITL)
  points when the load has varied; otherwise a prior splits the present ITL half and half
  (low confidence);
- Little's law: b = λ·S, and a request's time in the batch S scales with ITL, so the rate that
  holds b requests is λ(b) = λ_now · (b / b_now) · (ITL(b_now) / ITL(b));
- admission: the KV cache holds about b_now / kv_usage requests of the current mix (its capacity
  from the engine's configuration, as a fraction); near the rate that fills it requests queue,
  and TTFT's tail grows as an M/M/c queue's wait does (c = those slots, Erlang C), which sets how
  close to that rate a TTFT or e2e threshold lets the load go;
- the compute roofline, where the engine's GPUs report tensor activity: FLOPs grow with the
  request rate at a fixed mix, so the tensor pipes' share of their practical peak is the
  utilization ρ of the GPU as one server of prefill work, and λ_now / ρ the rate that would
  saturate it. Prompts wait for the prefills ahead of them as in an M/M/1 queue, which sets how
  close to that rate a TTFT threshold lets the load go. Without it a prefill-bound engine
  (long prompts, little KV held, a short decode) looked idle to the other three: 31 req/s
  estimated at half the 4.2 req/s where its TTFT SLO broke, 3.8 with it (tests/perf/slo_headroom.py).

The answer is the smallest rate over the SLO's dimensions and the pieces. Confidence is low (0.3)
on the prior alone, higher the more of the present load range the engine's history spans, 0.5
where the roofline binds.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from exporter.model import Histogram, Metric, QuantileSummary, Sample
from exporter.settings import SloTarget
from exporter.slo.attainment import DIMENSION_FAMILIES, REQUESTS_FAMILY
from exporter.slo.queueing import queueing_utilization
from exporter.slo.selectors import covers
from exporter.stages.inputs import gpu_owner
from exporter.window import LastSeen, histogram_quantile

#: load points kept per engine and model: at a 5 s interval, the last hour
HISTORY_POINTS = 720
#: an engine and model unseen this long have their history forgotten
HISTORY_SECONDS = 3600.0
#: KV usage past which the scheduler stops admitting (vLLM keeps a watermark, preemption starts)
KV_ADMISSION_LIMIT = 0.9
PRIOR_WEIGHT_FRACTION = 0.5
PRIOR_CONFIDENCE = 0.3
#: tensor activity of GPUs that run flat out on compute-bound work: DCGM's tensor-pipe activity
#: is the achieved fraction of peak FLOPs, and large prefill GEMMs reach about 0.6-0.8 of it
#: (PaLM's 0.46-0.76 model FLOPs utilization; the simulator's prefill-bound scenario runs at 0.7).
#: An engine seen higher raises it (the highest window mean of its history).
TENSOR_PRACTICAL_PEAK = 0.7
#: how far to trust a ceiling from one utilization reading and a queue model
ROOFLINE_CONFIDENCE = 0.5
#: a latency whose requests spent at most this share of it queued is the engine's own (_unqueued)
QUEUED_SHARE = 0.1
_TENSOR = "llm_gpu_tensor_active_ratio"
_ITL = DIMENSION_FAMILIES["itl"]
_QUEUE_TIME = "llm_engine_queue_time_seconds"
CONFIG_INFO = "llm_engine_config_info"


@dataclass(frozen=True)
class LoadPoint:
    """One snapshot of an engine's load and its latency at an SLO's objective quantile."""

    t: float
    rate: float  # completed requests per second over the window
    running: float  # mean of the running gauge over the same window as the latencies
    kv_usage: float
    # mean inter-token latency over the window (histogram sum / count): exact, where a quantile
    # is only as fine as the bucket edges around it
    itl_mean: float
    latency: dict[str, dict[str, float]]  # quantile -> {family: seconds}
    #: the mean running batch over the window by Little's law (NaN where the engine has no e2e
    #: histogram): used where the gauge's mean is 0 while requests complete, see _littles_law_running
    running_by_latency: float = math.nan
    #: the KV pool in tokens from the engine's configuration (llm_engine_config_info), NaN unknown
    kv_capacity_tokens: float = math.nan
    #: cumulative prompt and generated tokens and completed requests, for the window's request mix
    totals: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    #: mean tensor-pipe activity of the engine's own GPUs (NaN where none is attributed to it or
    #: they do not report it), averaged over the window like the running and KV gauges
    tensor_active: float = math.nan
    #: per latency family, the share of its window mean that requests spent queued (exact, from
    #: the histograms' sums; its quantiles are bucket-coarse below vLLM's first edge of 0.3 s)
    queue_share: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CapacityEstimate:
    max_request_rate: float
    max_concurrency: float
    rate: float
    confidence: float

    @property
    def headroom_ratio(self) -> float:
        return 1.0 - self.rate / self.max_request_rate if self.max_request_rate > 0 else -1.0

    @property
    def headroom_requests_per_second(self) -> float:
        return self.max_request_rate - self.rate


@dataclass(frozen=True)
class LinearFit:
    intercept: float
    slope: float
    confidence: float


def fit_decode_pace(points: Sequence[tuple[float, float]], now: tuple[float, float]) -> LinearFit:
    """ITL = a + c·b from (running, ITL) points; the prior when the load has not varied enough."""
    usable = [(b, itl) for b, itl in points if b > 0 and itl > 0 and math.isfinite(itl)]
    b_now, itl_now = now
    if len(usable) >= 4:
        bs = [b for b, _ in usable]
        spread = max(bs) / max(min(bs), 1e-9)
        if spread >= 1.5:
            n = len(usable)
            mean_b = sum(bs) / n
            mean_y = sum(y for _, y in usable) / n
            sxx = sum((b - mean_b) ** 2 for b in bs)
            sxy = sum((b - mean_b) * (y - mean_y) for b, y in usable)
            slope = sxy / sxx if sxx > 0 else 0.0
            intercept = mean_y - slope * mean_b
            if slope > 0 and intercept > 0:
                residual = sum((y - intercept - slope * b) ** 2 for b, y in usable)
                total = sum((y - mean_y) ** 2 for _, y in usable) or 1e-30
                r2 = max(0.0, 1.0 - residual / total)
                return LinearFit(intercept, slope, min(0.9, 0.4 + 0.5 * r2 * min(1.0, (spread - 1.0) / 2.0)))
    intercept = PRIOR_WEIGHT_FRACTION * itl_now
    return LinearFit(intercept, (itl_now - intercept) / max(b_now, 1.0), PRIOR_CONFIDENCE)


def estimate(slo: SloTarget, history: Sequence[LoadPoint], max_batch: float = math.inf) -> CapacityEstimate | None:
    """The rate and concurrency at which `slo` breaks, from the engine's load history; `max_batch`
    is the engine's own cap on running requests (vLLM's max_num_seqs) where it is known."""
    if not history:
        return None
    now = history[-1]
    if not (now.rate > 0 and now.running > 0):
        return None  # an idle engine shows nothing to extrapolate from
    q = f"{slo.objective:g}"
    lat = now.latency.get(q, {})
    if not now.itl_mean > 0:
        return None
    fit = fit_decode_pace([(p.running, p.itl_mean) for p in history], (now.running, now.itl_mean))
    # The objective quantile as a multiple of the mean (bucket-coarse, so never below the mean).
    spread = max(1.0, lat.get(_ITL, math.nan) / now.itl_mean) if lat.get(_ITL, 0) > 0 else 1.0

    def itl_at(b: float) -> float:
        return fit.intercept + fit.slope * b

    def rate_at(b: float) -> float:
        return now.rate * (b / now.running) * (itl_at(now.running) / itl_at(b))

    def batch_for_itl(mean_itl: float) -> float:
        return (mean_itl - fit.intercept) / fit.slope if fit.slope > 0 else math.inf

    # Admission: the batch the KV cache holds at the current mix; past it, requests wait.
    b_kv = now.running / now.kv_usage * KV_ADMISSION_LIMIT if now.kv_usage > 0 else math.inf
    # Admission stops at whichever comes first: a full KV cache or the engine's cap on the batch.
    b_kv = min(b_kv, max_batch)
    limits_b: list[float] = [b_kv]
    queue_factor = 1.0
    for dimension, threshold in slo.thresholds():
        ref, observed = _unqueued(history, q, DIMENSION_FAMILIES[dimension])
        if dimension == "itl":
            limits_b.append(batch_for_itl(threshold / spread))
        elif dimension == "e2e" and observed > 0:
            # Decode dominates a request's time: e2e scales with ITL.
            limits_b.append(batch_for_itl(itl_at(ref.running) * threshold / observed))
        if dimension in ("ttft", "e2e") and observed > 0 and math.isfinite(b_kv):
            utilization = queueing_utilization(threshold, observed, slo.objective, b_kv, rate_at(b_kv))
            queue_factor = min(queue_factor, utilization)
    b_max = max(0.0, min(limits_b))
    result: CapacityEstimate | None = None
    if b_max == b_kv and math.isfinite(b_max):
        # Queueing at admission: the rate, and by Little's law the batch it holds, scale together.
        result = CapacityEstimate(rate_at(b_max) * queue_factor, b_max * queue_factor, now.rate, fit.confidence)
    elif math.isfinite(b_max):
        result = CapacityEstimate(rate_at(b_max), b_max, now.rate, fit.confidence)
    ceiling = compute_ceiling(slo, history, lat)
    if result is not None and result.max_request_rate <= ceiling:
        return result
    if not math.isfinite(ceiling):
        return None
    # The roofline binds first: the batch it holds at today's time in the engine (Little's law).
    return CapacityEstimate(ceiling, now.running * ceiling / now.rate, now.rate, ROOFLINE_CONFIDENCE)


def _unqueued(history: Sequence[LoadPoint], q: str, family: str) -> tuple[LoadPoint, float]:
    """The point whose latency of `family` the estimate scales, and that latency without its wait.

    The wait for admission is the queue's, which the queueing model adds back at the rate it
    estimates. Under overload the wait is nearly all of a latency and its tail, so the latest point
    whose requests barely queued (QUEUED_SHARE of their time) stands in; where there is none, today's
    latency less the queue's share of its mean. Scaling today's as it was held an engine past its
    batch cap to no capacity at all, and one queueing at half its e2e to three times its knee.
    """
    now = history[-1]
    for point in reversed(history):
        share = point.queue_share.get(family, 0.0)
        observed = point.latency.get(q, {}).get(family, math.nan)
        if share <= QUEUED_SHARE and observed > 0:
            return point, observed * (1.0 - share)
    return now, now.latency.get(q, {}).get(family, math.nan) * (1.0 - now.queue_share.get(family, 0.0))


def compute_ceiling(slo: SloTarget, history: Sequence[LoadPoint], latency: dict[str, float]) -> float:
    """The request rate at which the engine's GPUs run out of compute for `slo`; inf unknown.

    ρ = tensor activity / its practical peak (TENSOR_PRACTICAL_PEAK, or the highest the history
    shows) is the share of the time the GPUs spend on FLOPs,
    which scale with the request rate at today's mix, so μ = λ_now / ρ saturates them. A prompt
    waits for the compute-bound prefills ahead of it, the GPU one server: as in an M/M/1 queue, a
    quantile of the time to first token grows as 1 / (1 - ρ), so today's TTFT at the objective
    quantile, scaled so, meets the threshold at ρ_max = 1 - (1 - ρ_now) · observed / threshold.
    Scaling the whole of it (the prefill's own time does not grow) errs on the safe side. The
    other dimensions are held to μ itself: decode steps run in the time prefills leave, so an
    inter-token or e2e threshold is not what compute limits until it is gone.
    """
    now = history[-1]
    if not (now.tensor_active > 0 and now.rate > 0):
        return math.inf
    peak = max(TENSOR_PRACTICAL_PEAK, max(p.tensor_active for p in history if p.tensor_active > 0))
    rho = min(0.99, now.tensor_active / peak)
    utilization = 1.0
    for dimension, threshold in slo.thresholds():
        family = DIMENSION_FAMILIES[dimension]
        # as in estimate(): the wait for admission is not the prefills' queue
        observed = latency.get(family, math.nan) * (1.0 - now.queue_share.get(family, 0.0))
        if dimension == "ttft" and observed > 0:
            utilization = min(utilization, max(0.0, 1.0 - (1.0 - rho) * observed / threshold))
    return now.rate / rho * utilization


class CapacityEstimator:
    """Per engine and model, the load history and the estimates of every SLO covering it."""

    def __init__(self) -> None:
        self._history: dict[tuple[str, str], deque[LoadPoint]] = {}
        self._gauges: dict[tuple[str, str], deque[tuple[float, float, float, float]]] = {}
        self._totals: dict[tuple[str, str], deque[tuple[float, tuple[float, float, float]]]] = {}
        self._seen: LastSeen[tuple[str, str]] = LastSeen(HISTORY_SECONDS)

    def update(
        self, slos: Sequence[SloTarget], metrics: Iterable[Metric], now: float, caps: Mapping[str, int] | None = None
    ) -> list[Metric]:
        """`caps`: per engine name (`default` for the others) its max_num_seqs, where configured:
        the rate is the one the engine reaches under that cap, the concurrency the one the SLO
        allows whatever the cap (what the cap should be)."""
        readings = _engine_readings(metrics, {f"{s.objective:g}" for s in slos})
        caps = caps or {}
        for key in self._seen.gone(readings, now):
            del self._history[key]
            self._gauges.pop(key, None)
            self._totals.pop(key, None)
        out: list[Metric] = []
        for key, (labels, point) in readings.items():
            history = self._history.setdefault(key, deque(maxlen=HISTORY_POINTS))
            gauge = self._gauges.setdefault(key, deque(maxlen=HISTORY_POINTS))
            totals = self._totals.setdefault(key, deque(maxlen=HISTORY_POINTS))
            if point is not None:
                # The latencies are window means; the running and KV gauges are instants: average
                # them over the same window, or their noise flattens the fitted slope (regression
                # dilution), and an engine that just went idle would read as having no load at all.
                gauge.append((now, point.running, point.kv_usage, point.tensor_active))
                while gauge and gauge[0][0] <= now - point.t:
                    gauge.popleft()
                gauge_mean = _finite_mean(r for _, r, _, _ in gauge)
                batch = gauge_mean if gauge_mean > 0 else point.running_by_latency
                kv_mean = _finite_mean((u for _, _, u, _ in gauge), empty=0.0)
                totals.append((now, point.totals))
                while totals and totals[0][0] < now - point.t:
                    totals.popleft()
                if not kv_mean > 0 and batch > 0:
                    # The KV gauge missed the load as the running one did: the batch's share of
                    # the configured pool at the window's request mix instead.
                    kv_mean = _kv_usage_from_mix(batch, point.kv_capacity_tokens, totals[0][1], point.totals)
                tensor_mean = _finite_mean(x for _, _, _, x in gauge)
                history.append(replace(point, t=now, running=batch, kv_usage=kv_mean, tensor_active=tensor_mean))
            for slo in slos:
                if not covers(slo, *key):
                    continue
                result = estimate(slo, history)
                cap = caps.get(key[0], caps.get("default"))
                capped = result if cap is None else estimate(slo, history, float(cap))
                if result is None or capped is None:
                    continue
                series = {**labels, "slo": slo.name}
                result = replace(capped, max_concurrency=result.max_concurrency)
                out += [
                    Sample("llm_capacity_max_request_rate", series, result.max_request_rate),
                    Sample("llm_capacity_max_concurrency", series, result.max_concurrency),
                    Sample("llm_capacity_headroom_ratio", series, result.headroom_ratio),
                    Sample("llm_capacity_estimate_confidence_ratio", series, result.confidence),
                ]
        return out


def _finite_mean(values: Iterable[float], empty: float = math.nan) -> float:
    """The mean of the finite values (a gauge the engine did not report this round is NaN)."""
    kept = [v for v in values if math.isfinite(v)]
    return sum(kept) / len(kept) if kept else empty


def _engine_readings(
    metrics: Iterable[Metric], quantiles: set[str]
) -> dict[tuple[str, str], tuple[dict[str, str], LoadPoint | None]]:
    gauges: dict[tuple[str, str], dict[str, float]] = {}
    summaries: dict[tuple[str, str], dict[str, QuantileSummary]] = {}
    labels: dict[tuple[str, str], dict[str, str]] = {}
    settings: dict[tuple[str, str], dict[str, str]] = {}
    tensor: dict[str, list[float]] = {}  # engine name ("" unattributed) → its GPUs' readings
    for metric in metrics:
        if metric.name == _TENSOR and isinstance(metric, Sample):
            tensor.setdefault(metric.labels.get("engine", ""), []).append(metric.value)
            continue
        if "engine_type" not in metric.labels:
            continue
        key = (metric.labels.get("engine", ""), metric.labels.get("model", ""))
        if isinstance(metric, Sample):
            gauges.setdefault(key, {})[metric.name] = metric.value
            if metric.name == "llm_engine_up":
                labels[key] = dict(metric.labels)
            elif metric.name == CONFIG_INFO:
                settings[key] = dict(metric.labels)
        elif metric.histogram is not None:
            summaries.setdefault(key, {})[metric.name] = metric
    # GPUs join engines as the diagnosis joins them, never another engine's (gpu_owner).
    single_engine = len({engine for engine, _ in labels}) == 1
    result: dict[tuple[str, str], tuple[dict[str, str], LoadPoint | None]] = {}
    for key, series_labels in labels.items():
        point = _load_point(gauges.get(key, {}), summaries.get(key, {}), settings.get(key, {}), quantiles)
        owner = gpu_owner(key[0], tensor, single_engine)
        if point is not None and owner is not None:
            point = replace(point, tensor_active=sum(tensor[owner]) / len(tensor[owner]))
        result[key] = (series_labels, point)
    return result


def _load_point(
    gauges: dict[str, float], families: dict[str, QuantileSummary], settings: dict[str, str], quantiles: set[str]
) -> LoadPoint | None:
    requests = families.get(REQUESTS_FAMILY)
    if requests is None or requests.window is None or not requests.window_seconds > 0:
        return None
    latency: dict[str, dict[str, float]] = {}
    for q in quantiles:
        latency[q] = {
            name: histogram_quantile(float(q), s.window.bounds, s.window.cumulative)
            for name, s in families.items()
            if s.window is not None
        }
    itl = families.get(_ITL)
    itl_window = itl.window if itl is not None else None
    queue = families.get(_QUEUE_TIME)
    queue_mean = _window_mean(queue)
    shares = {
        name: min(1.0, queue_mean / mean)
        for name in (DIMENSION_FAMILIES["ttft"], DIMENSION_FAMILIES["e2e"])
        if (mean := _window_mean(families.get(name))) > 0 and queue_mean >= 0
    }
    return LoadPoint(
        running_by_latency=_littles_law_running(requests.window, families.get(_QUEUE_TIME), requests.window_seconds),
        t=requests.window_seconds,  # the window's span until the estimator stamps the time
        itl_mean=itl_window.sum / itl_window.count if itl_window is not None and itl_window.count > 0 else math.nan,
        rate=requests.window.count / requests.window_seconds,
        running=gauges.get("llm_engine_requests_running", math.nan),
        kv_usage=gauges.get("llm_engine_kv_cache_usage_ratio", 0.0),
        latency=latency,
        kv_capacity_tokens=kv_pool_tokens(settings),
        totals=(
            gauges.get("llm_engine_prompt_tokens_total", math.nan),
            gauges.get("llm_engine_generation_tokens_total", math.nan),
            requests.count,
        ),
        queue_share=shares,
    )


def _window_mean(summary: QuantileSummary | None) -> float:
    window = summary.window if summary is not None else None
    return window.sum / window.count if window is not None and window.count > 0 else math.nan


def _littles_law_running(requests: Histogram, queue: QuantileSummary | None, window_s: float) -> float:
    """The mean running batch over the window by Little's law: the time the window's completed
    requests spent in the engine, less the time they waited in its queue, over the window's span.

    The running gauge is read at scrape instants, and can miss the load entirely: requests that
    start and finish between two scrapes, or an engine whose server answers /metrics only between
    bursts (a CPU-starved vLLM's API server does: 12 reads of 12 said running 0 under load), make an
    engine with a steady request rate look idle. The histogram sums count every request. Requests
    that began before the window and ended in it count whole: a window much longer than a request
    makes that small. It stands in only where the gauge's mean is 0: preferred always, it moved the
    simulator's decode-bound estimate from +8 % to +42 % off the truth (tests/perf/slo_headroom.py).
    """
    if not (requests.count > 0 and window_s > 0):
        return math.nan
    queued = queue.window.sum if queue is not None and queue.window is not None else 0.0
    return max(0.0, requests.sum - queued) / window_s


def kv_pool_tokens(settings: dict[str, str]) -> float:
    """The KV pool in tokens from the engine's settings (kv_cache_size_tokens, or num_gpu_blocks
    times block_size); NaN when it reports neither."""
    size = settings.get("kv_cache_size_tokens")
    try:
        return float(size) if size is not None else float(settings["num_gpu_blocks"]) * float(settings["block_size"])
    except (KeyError, ValueError):
        return math.nan


def _kv_usage_from_mix(
    batch: float, pool_tokens: float, start: tuple[float, float, float], end: tuple[float, float, float]
) -> float:
    """The KV usage a running batch of today's mix holds: each request its prompt and, on average
    over its decode, half its answer, from the window's token and request counts; 0 unknown.

    Why: the KV gauge is an instant, read when the engine's server answers; on a CPU-starved vLLM
    that is between bursts, and every read said 0 while requests ran. With a usage of 0 the
    estimator saw no admission limit at all, and a TTFT SLO (limited only there) got no figure.
    """
    prompts, answers, requests = (b - a for a, b in zip(start, end))
    if not (requests > 0 and pool_tokens > 0 and prompts >= 0 and answers >= 0):
        return 0.0
    held = (prompts + answers / 2.0) / requests
    return min(1.0, batch * held / pool_tokens) if held > 0 else 0.0
