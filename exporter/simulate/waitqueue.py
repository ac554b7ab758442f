"""The engine's waiting queue: first come first served, or shortest job first.

FCFS is vLLM's default; a preempted request goes back to the head (V1 `prepend_request`) so it is
the next to resume. Shortest-job-first orders by prompt tokens (the job size the scheduler knows
before running it), one of the seed case's remedies; a preempted request keeps its place by size.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator

from exporter.simulate.workload import Request

POLICIES = ("fcfs", "sjf")


class WaitQueue:
    def __init__(self, policy: str = "fcfs") -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown scheduling policy {policy!r}")
        self.policy = policy
        self._fifo: deque[Request] = deque()
        self._heap: list[tuple[int, float, int, Request]] = []

    def __len__(self) -> int:
        return len(self._fifo) if self.policy == "fcfs" else len(self._heap)

    def __iter__(self) -> Iterator[Request]:
        if self.policy == "fcfs":
            return iter(self._fifo)
        return (entry[3] for entry in self._heap)

    def push(self, request: Request) -> None:
        if self.policy == "fcfs":
            self._fifo.append(request)
        else:
            heapq.heappush(self._heap, (request.prompt_tokens, request.arrival, request.id, request))

    def push_front(self, request: Request) -> None:
        if self.policy == "fcfs":
            self._fifo.appendleft(request)
        else:
            self.push(request)

    def peek(self) -> Request:
        return self._fifo[0] if self.policy == "fcfs" else self._heap[0][3]

    def pop(self) -> Request:
        return self._fifo.popleft() if self.policy == "fcfs" else heapq.heappop(self._heap)[3]

    def remove_if(self, condition: Callable[[Request], bool]) -> list[Request]:
        """Take out every request matching `condition` (client timeouts); keeps the order."""
        removed = [r for r in self if condition(r)]
        if not removed:
            return removed
        if self.policy == "fcfs":
            self._fifo = deque(r for r in self._fifo if not condition(r))
        else:
            self._heap = [e for e in self._heap if not condition(e[3])]
            heapq.heapify(self._heap)
        return removed

    def with_policy(self, policy: str) -> WaitQueue:
        """The same requests under another policy (a reconfigured engine)."""
        queue = WaitQueue(policy)
        for request in sorted(self, key=lambda r: (r.arrival, r.id)):
            queue.push(request)
        return queue
