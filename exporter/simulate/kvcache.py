"""The paged KV cache: a fixed pool of blocks, private blocks per request, shared prefix blocks.

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
