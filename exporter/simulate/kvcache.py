"""The paged KV cache: a fixed pool of blocks, private blocks per request, shared prefix blocks;
and the sliding-window pool a hybrid model has beside it on SGLang.

As in vLLM's block manager (PagedAttention, [S3]): the pool is allocated once at start-up, each
request holds ceil(tokens / block_size) blocks, and with prefix caching the full blocks of a
shared prefix are kept in a hash table and referenced by every request that starts with it.
Cached blocks that no running request references stay in the table but count as free (vLLM's
free queue holds them and evicts the least recently used when it needs room), which is why
`vllm:kv_cache_usage_perc` excludes them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.simulate.hardware import ModelSpec
    from exporter.simulate.workload import Request

PrefixKey = tuple[int, int]  # (prefix group, prefix length in tokens)


@dataclass
class _Prefix:
    blocks: int
    refs: int = 0


class KvCache:
    def __init__(self, total_blocks: int, block_size: int) -> None:
        if total_blocks <= 0:
            raise ValueError("the KV pool has no blocks: the weights leave no room for KV")
        self.total_blocks = total_blocks
        self.block_size = block_size
        self.private_blocks = 0
        self.referenced_blocks = 0  # prefix blocks some running request uses
        self.idle_cached_blocks = 0  # prefix blocks kept for reuse, evictable
        # The most blocks ever occupied at once, cached ones included (tests check it against the pool).
        self.peak_occupied_blocks = 0
        self._prefixes: OrderedDict[PrefixKey, _Prefix] = OrderedDict()  # LRU order

    @property
    def used_blocks(self) -> int:
        return self.private_blocks + self.referenced_blocks

    @property
    def free_blocks(self) -> int:
        """Blocks an allocation may take, evicting idle cached prefixes if needed."""
        return self.total_blocks - self.used_blocks

    @property
    def usage(self) -> float:
        return self.used_blocks / self.total_blocks

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate(self, blocks: int) -> None:
        """Take `blocks` for a request; the scheduler checks `free_blocks` first, so running out
        here is a bug in the scheduler, not a state of the engine."""
        if blocks > self.free_blocks:
            raise RuntimeError(f"KV pool overcommitted: {blocks} blocks asked, {self.free_blocks} free")
        self._make_room(blocks)
        self.private_blocks += blocks
        self._note_peak()

    def free(self, blocks: int) -> None:
        self.private_blocks -= blocks
        assert self.private_blocks >= 0, "freed more KV blocks than were allocated"

    def cached_blocks(self, key: PrefixKey) -> int:
        entry = self._prefixes.get(key)
        return entry.blocks if entry is not None else 0

    def idle_blocks(self, key: PrefixKey) -> int:
        """Blocks that acquiring `key` turns from free (evictable) into used."""
        entry = self._prefixes.get(key)
        return entry.blocks if entry is not None and entry.refs == 0 else 0

    def acquire(self, key: PrefixKey) -> int:
        """Reference a cached prefix for a newly scheduled request; returns its blocks."""
        entry = self._prefixes.get(key)
        if entry is None:
            return 0
        if entry.refs == 0:
            self.idle_cached_blocks -= entry.blocks
            self.referenced_blocks += entry.blocks
            self._note_peak()
        entry.refs += 1
        self._prefixes.move_to_end(key)
        return entry.blocks

    def release(self, key: PrefixKey) -> None:
        entry = self._prefixes[key]
        entry.refs -= 1
        if entry.refs == 0:
            self.referenced_blocks -= entry.blocks
            self.idle_cached_blocks += entry.blocks

    def publish(self, key: PrefixKey, blocks: int) -> bool:
        """A request finished computing a prefix nobody had cached: its first `blocks` private
        blocks become the shared entry, referenced by that request."""
        if blocks <= 0 or key in self._prefixes:
            return False
        self.private_blocks -= blocks
        self.referenced_blocks += blocks
        self._prefixes[key] = _Prefix(blocks, refs=1)
        return True

    def _note_peak(self) -> None:
        occupied = self.private_blocks + self.referenced_blocks + self.idle_cached_blocks
        if occupied > self.peak_occupied_blocks:
            self.peak_occupied_blocks = occupied

    def _make_room(self, blocks: int) -> None:
        truly_free = self.total_blocks - self.used_blocks - self.idle_cached_blocks
        if truly_free >= blocks:
            return
        for key in list(self._prefixes):
            entry = self._prefixes[key]
            if entry.refs:
                continue
            del self._prefixes[key]
            self.idle_cached_blocks -= entry.blocks
            truly_free += entry.blocks
            if truly_free >= blocks:
                return


def hybrid_pool_tokens(model: ModelSpec, pool_tokens: int, swa_full_tokens_ratio: float) -> tuple[int, int]:
    """(full-attention, sliding-window) pool sizes in tokens for a hybrid model on SGLang.

    `pool_tokens` is what the KV memory holds at every layer's cost per token. SGLang splits the
    same memory so that the SWA pool has `swa_full_tokens_ratio` times the full pool's tokens
    (`--swa-full-tokens-ratio`, model_runner's hybrid sizing): full x full layers + swa x SWA
    layers = pool_tokens x all layers.
    """
    swa_layers = model.layers - model.full_attention_layers
    full = int(pool_tokens * model.layers / (model.full_attention_layers + swa_full_tokens_ratio * swa_layers))
    return full, int(full * swa_full_tokens_ratio)


@dataclass
class SlidingWindowPool:
    """The sliding-window (SWA) layers' own KV pool of a hybrid model, as SGLang keeps it.

    A request holds a slot per token it has computed, but only within the window: SGLang frees the
    slots that slide out of it (`swa_evicted_seqlen`), so a request holds min(context, window). A
    request shorter than the window costs the SWA pool as much as the full one, which is why many
    short requests fill the (smaller) SWA pool while the full pool still has room. Slots are per
    request (a shared prefix is not deduplicated here) and at token granularity (SGLang's page 1).
    """

    total_tokens: int
    window: int
    used_tokens: int = 0

    def __post_init__(self) -> None:
        if self.total_tokens <= 0:
            raise ValueError("the sliding-window pool has no slots: the weights leave no room for KV")

    @property
    def free_tokens(self) -> int:
        return self.total_tokens - self.used_tokens

    def growth(self, request: Request, context: int) -> int:
        """Slots `request` needs to hold `context` tokens of which the window keeps the last ones."""
        return max(0, min(context, self.window) - request.swa_tokens)

    def take(self, request: Request, context: int) -> None:
        grow = self.growth(request, context)
        if grow > self.free_tokens:
            raise RuntimeError(f"SWA pool overcommitted: {grow} slots asked, {self.free_tokens} free")
        self.used_tokens += grow
        request.swa_tokens += grow

    def release(self, request: Request) -> None:
        self.used_tokens -= request.swa_tokens
        request.swa_tokens = 0
        assert self.used_tokens >= 0, "freed more SWA slots than were taken"
