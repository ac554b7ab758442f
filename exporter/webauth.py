"""Basic auth and request budgets for the web config: bcrypt checks that are paid once per
credential, cost the same for unknown users and run two at a time at most, failures throttled per
client address, and the configured `rate_limit`, which only requests that passed auth spend
(one budget for them all), or, with no basic auth, each client address its own.

The order matters (a security review's findings): a rate limit checked before auth let an
unauthenticated flood turn every real scrape into a 429, and bcrypt run on every request let a
few clients without a password burn whole cores.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from enum import Enum

import bcrypt

from exporter.webconfig import bcrypt_cost

#: verified credentials remembered (exporter-toolkit caches them the same way)
AUTH_CACHE_SIZE = 1024
#: failed checks a client address may make at once, and the seconds until it may make one more
AUTH_FAILURE_BURST = 10
AUTH_FAILURE_SECONDS = 1.0
#: bcrypt checks run at once, whatever the number of clients: each takes a core for its duration
#: (about 0.1 s at cost 10); a check that waits longer than this for its turn is answered 429
BCRYPT_CONCURRENCY = 2
BCRYPT_WAIT_SECONDS = 5.0
#: client addresses whose failures are tracked; the least recently seen are forgotten first
TRACKED_CLIENTS = 4096


class TokenBucket:
    """`burst` tokens, one more every `seconds_per_token`: exporter-toolkit's rate limiter."""

    def __init__(self, seconds_per_token: float, burst: int) -> None:
        self.seconds_per_token, self.burst = seconds_per_token, burst
        self._tokens, self._at = float(burst), time.monotonic()

    def take(self) -> bool:
        """Spend a token if there is one. Not locked: callers hold their own lock."""
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) / self.seconds_per_token)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
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

    def take(self, client: str) -> bool:
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = TokenBucket(self.seconds_per_token, self.burst)
            if len(self._buckets) > self.capacity:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(client)
        return bucket.take()

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
    THROTTLED = "throttled"  # 429, and no bcrypt run: this client failed too often, or checks queue up


class BasicAuth:
    """Checks `Authorization: Basic` against bcrypt hashes, for any number of reloads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        self._failures = ClientBuckets(AUTH_FAILURE_SECONDS, AUTH_FAILURE_BURST)
        self._dummies: dict[int, bytes] = {}
        self._bcrypt_turns = threading.BoundedSemaphore(BCRYPT_CONCURRENCY)

    def check(self, authorization: str | None, users: Mapping[str, bytes], client: str) -> Verdict:
        credentials = _credentials(authorization)
        if credentials is None:  # no bcrypt to run: as cheap as any 404, nothing to throttle
            return Verdict.DENIED
        user, password = credentials
        hashed = users.get(user)
        key = _cache_key(user, password, hashed)
        with self._lock:
            if key in self._verified:
                self._verified.move_to_end(key)
                return Verdict.ALLOWED
            # Every check that runs bcrypt spends from the client's budget; a verified credential
            # never comes here again, so in effect only failures do.
            if not self._failures.take(client):
                return Verdict.THROTTLED
        if not self._bcrypt_turns.acquire(timeout=BCRYPT_WAIT_SECONDS):
            return Verdict.THROTTLED
        try:
            # An unknown user costs a check at the users' cost too, so timing does not tell who exists.
            ok = bcrypt.checkpw(password.encode(), hashed or self.dummy_hash(users)) and hashed is not None
        except ValueError:  # bcrypt >= 5 refuses passwords over 72 bytes; so does Go's
            ok = False
        finally:
            self._bcrypt_turns.release()
        if ok:
            with self._lock:
                self._verified[key] = None
                if len(self._verified) > AUTH_CACHE_SIZE:
                    self._verified.popitem(last=False)
        return Verdict.ALLOWED if ok else Verdict.DENIED

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
