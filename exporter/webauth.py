"""Basic auth and request budgets for the web config: bcrypt checks that are paid once per
credential (right or wrong), cost the same for unknown users, and run one at a time within a
budget of CPU seconds shared fairly by every client; and the configured `rate_limit`, which only
requests that passed auth spend (one budget for them all), or, with no basic auth, each client
address its own.

What a security review found, and why the design is this one:
- a rate limit checked before auth let an unauthenticated flood turn every real scrape into a 429;
- bcrypt run on every request let a few clients without a password burn whole cores (a cost-16
  hash: 1.5 cores from one client at one request a second);
- a per-address throttle on failures, checked before bcrypt, let a wrong-password flood from the
  scraper's own address lock the right password out (429) until that password happened to be
  cached: after a restart or a password change, Prometheus was refused.
So nothing is refused for failures. A credential that was checked is answered from a cache
(verified or failed) without bcrypt: repeating a wrong password costs nothing and throttles no one.
A new credential waits for its turn: turns go round-robin across client addresses and in arrival
order within one, so a right password waits behind at most the checks already queued (never a
refusal earned by someone else's failures), and the work of every check together stays within
BCRYPT_CORE_SHARE of a core. Only a check that cannot get its turn within BCRYPT_WAIT_SECONDS, or
one past MAX_BCRYPT_WAITERS, is answered 429: the budget, not a failure count, refuses it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from enum import Enum

import bcrypt

from exporter.webconfig import bcrypt_cost

#: credentials remembered once checked, right ones and wrong ones (exporter-toolkit caches right
#: ones the same way); the least recently used are forgotten first
AUTH_CACHE_SIZE = 1024
FAILED_CACHE_SIZE = 4096
#: bcrypt's CPU across all clients: a quarter of a core on average, with two seconds of burst (a
#: cost-10 check takes about 0.05 s, cost 12 four times that)
BCRYPT_CORE_SHARE = 0.25
BCRYPT_BURST_SECONDS = 2.0
#: how long a new credential may wait for its turn, and how many may wait at once (half the HTTP
#: server's connection slots, so waiting checks never hold every slot)
BCRYPT_WAIT_SECONDS = 5.0
MAX_BCRYPT_WAITERS = 32
#: client addresses whose rate-limit buckets are tracked; the least recently seen are forgotten first
TRACKED_CLIENTS = 4096


class TokenBucket:
    """`burst` tokens, one more every `seconds_per_token`: exporter-toolkit's rate limiter."""

    def __init__(self, seconds_per_token: float, burst: int) -> None:
        self.seconds_per_token, self.burst = seconds_per_token, burst
        self._tokens, self._at = float(burst), time.monotonic()

    def take(self, amount: float = 1.0) -> bool:
        """Spend `amount` tokens if there are that many. Not locked: callers hold their own lock."""
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) / self.seconds_per_token)
        self._at = now
        if self._tokens < amount:
            return False
        self._tokens -= amount
        return True


class ClientBuckets:
    """A TokenBucket per client address, the least recently seen forgotten past `capacity`.

    Bounded, so addresses made up by the thousand cost a fixed table; one forgotten starts again
    with a full bucket (a limit loosened for it, never tightened for anyone else). Not locked:
    callers hold their own lock.
    """

    def __init__(self, seconds_per_token: float, burst: int, capacity: int = TRACKED_CLIENTS) -> None:
        self.seconds_per_token, self.burst, self.capacity = seconds_per_token, burst, capacity
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def take(self, client: str, amount: float = 1.0) -> bool:
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = TokenBucket(self.seconds_per_token, self.burst)
            if len(self._buckets) > self.capacity:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(client)
        return bucket.take(amount)

    def __len__(self) -> int:
        return len(self._buckets)


class RateLimit:
    """The web config's `rate_limit`. With basic auth, one budget that every authenticated request
    spends (exporter-toolkit's limiter; only requests that passed auth reach it). Without, a budget
    per client address: with no credentials to tell scrapers from a flood, one global bucket would
    let one noisy address get every other address's scrapes 429. Not locked."""

    def __init__(self, seconds_per_token: float, burst: int, per_client: bool) -> None:
        self._limiter = ClientBuckets(seconds_per_token, burst) if per_client else TokenBucket(seconds_per_token, burst)

    def take(self, client: str) -> bool:
        limiter = self._limiter
        return limiter.take(client) if isinstance(limiter, ClientBuckets) else limiter.take()


class Verdict(Enum):
    ALLOWED = "allowed"
    DENIED = "denied"  # 401
    THROTTLED = "throttled"  # 429: no bcrypt turn within the wait (the CPU budget is spent by others)


class BcryptTurns:
    """Bcrypt checks one at a time across every client, within a budget of CPU seconds.

    Waiting checks take turns round-robin across client addresses and in arrival order within one.
    The CPU each check took (its thread's CPU time) is charged to a bucket refilled at `core_share`
    CPU seconds a second, up to `burst_seconds`; a check starts only while the bucket is above
    zero, so over any stretch of T seconds the checks take at most burst + share × T CPU seconds,
    plus the one that was running.
    """

    def __init__(
        self,
        core_share: float = BCRYPT_CORE_SHARE,
        burst_seconds: float = BCRYPT_BURST_SECONDS,
        max_waiters: int = MAX_BCRYPT_WAITERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.core_share, self.burst_seconds, self.max_waiters = core_share, burst_seconds, max_waiters
        self._clock = clock
        self._turns = threading.Condition()
        self._queues: OrderedDict[str, deque[object]] = OrderedDict()  # client -> tickets; clients in turn order
        self._waiting = 0
        self._running = False
        self._cpu_seconds, self._at = burst_seconds, clock()

    def run(self, client: str, check: Callable[[], bool], wait: float) -> bool | None:
        """`check()` in its turn; None when no turn came within `wait` seconds (or too many wait)."""
        ticket = object()
        with self._turns:
            if self._waiting >= self.max_waiters:
                return None
            self._queues.setdefault(client, deque()).append(ticket)
            self._waiting += 1
            try:
                if not self._await_turn(client, ticket, self._clock() + wait):
                    return None
            finally:
                self._waiting -= 1
        started = time.thread_time()
        try:
            return check()
        finally:
            spent = time.thread_time() - started
            with self._turns:
                self._cpu_seconds -= spent
                self._running = False
                self._turns.notify_all()

    def _await_turn(self, client: str, ticket: object, deadline: float) -> bool:
        """Wait (holding the condition) until `ticket` may run, and mark it running; False at the deadline."""
        while True:
            self._refill()
            head = next(iter(self._queues.values()))[0]
            if head is ticket and not self._running and self._cpu_seconds > 0:
                break
            remaining = deadline - self._clock()
            if remaining <= 0:
                queue = self._queues[client]
                queue.remove(ticket)
                if not queue:
                    del self._queues[client]
                self._turns.notify_all()  # the head may have changed
                return False
            # Woken when a check ends or a waiter leaves; the bucket refills on its own schedule.
            refill = -self._cpu_seconds / self.core_share if self._cpu_seconds <= 0 else remaining
            self._turns.wait(min(remaining, refill + 0.001))
        queue = self._queues[client]
        queue.popleft()
        if queue:
            self._queues.move_to_end(client)  # this client's next check goes after every other client's
        else:
            del self._queues[client]
        self._running = True
        return True

    def _refill(self) -> None:
        now = self._clock()
        self._cpu_seconds = min(self.burst_seconds, self._cpu_seconds + (now - self._at) * self.core_share)
        self._at = now


class BasicAuth:
    """Checks `Authorization: Basic` against bcrypt hashes, for any number of reloads."""

    def __init__(self, turns: BcryptTurns | None = None) -> None:
        self._lock = threading.Lock()
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        self._failed: OrderedDict[bytes, None] = OrderedDict()
        self._dummies: dict[int, bytes] = {}
        self.turns = turns or BcryptTurns()

    def check(self, authorization: str | None, users: Mapping[str, bytes], client: str) -> Verdict:
        credentials = _credentials(authorization)
        if credentials is None:  # no bcrypt to run: as cheap as any 404, nothing to throttle
            return Verdict.DENIED
        user, password = credentials
        hashed = users.get(user)
        key = _cache_key(user, password, hashed)
        known = self._known(key)
        if known is not None:
            return known
        ok = self.turns.run(client, lambda: self._verify(key, password, hashed, users), BCRYPT_WAIT_SECONDS)
        if ok is None:
            return Verdict.THROTTLED
        with self._lock:
            cache, size = (self._verified, AUTH_CACHE_SIZE) if ok else (self._failed, FAILED_CACHE_SIZE)
            cache[key] = None
            if len(cache) > size:
                cache.popitem(last=False)
        return Verdict.ALLOWED if ok else Verdict.DENIED

    def _known(self, key: bytes) -> Verdict | None:
        """The verdict on a credential checked before, without bcrypt; None for a new one."""
        with self._lock:
            for cache, verdict in ((self._verified, Verdict.ALLOWED), (self._failed, Verdict.DENIED)):
                if key in cache:
                    cache.move_to_end(key)
                    return verdict
        return None

    def _verify(self, key: bytes, password: str, hashed: bytes | None, users: Mapping[str, bytes]) -> bool:
        known = self._known(key)  # the same credential may have been checked while this one waited
        if known is not None:
            return known is Verdict.ALLOWED
        try:
            # An unknown user costs a check at the users' cost too, so timing does not tell who exists.
            return bcrypt.checkpw(password.encode(), hashed or self.dummy_hash(users)) and hashed is not None
        except ValueError:  # bcrypt >= 5 refuses passwords over 72 bytes; so does Go's
            return False

    def dummy_hash(self, users: Mapping[str, bytes]) -> bytes:
        """A hash no password matches, at the highest cost among `users`. Only the salt part is read
        by checkpw's hashing, so no hashpw (seconds at high costs) is needed to make one."""
        cost = max((bcrypt_cost(hashed) for hashed in users.values()), default=10)
        with self._lock:
            if cost not in self._dummies:
                self._dummies[cost] = bcrypt.gensalt(rounds=cost) + b"." * 31
            return self._dummies[cost]


def _credentials(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


def _cache_key(user: str, password: str, hashed: bytes | None) -> bytes:
    """A digest of user, hash and password (JSON: no separator a user name could forge)."""
    return hashlib.sha256(json.dumps([user, (hashed or b"").decode(), password]).encode()).digest()
