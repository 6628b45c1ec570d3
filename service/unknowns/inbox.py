"""The unknowns inbox: groups of reports no rule decided, most frequent first, with bounded memory.

Space-saving top-K (Metwally et al.): at most `capacity` groups are kept. A report of a known
group adds one to its count; a new group, when the inbox is full, takes the place of the
least frequent one and inherits its count plus one (so a count may overestimate by at most
`error`, which is shown). A flood of distinct errors keeps memory flat and cannot push out a
group that really is frequent.

Two stores behind one interface: `MemoryInbox` (one process) and `RedisInbox`
(ERRTRIAGE_REDIS_URL: one Lua script per report keeps the same algorithm on a ZSET of counts
and a HASH per group, under errtriage:unknowns:, so every replica shares one inbox).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast

import orjson
from redis.asyncio import Redis

from service.notify.outbox import PREFIX

UNKNOWNS_PREFIX = PREFIX + "unknowns:"
COUNTS_KEY = UNKNOWNS_PREFIX + "counts"
TOTAL_KEY = UNKNOWNS_PREFIX + "total"
GROUP_PREFIX = UNKNOWNS_PREFIX + "group:"


@dataclass
class Group:
    fingerprint: str
    count: int
    error: int  # the count this group may have inherited from the one it replaced
    first_seen: float
    last_seen: float
    example: dict[str, Any]
    suggested: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Sighting:
    """One report, ready for the store: its group's key, redacted example and the fallback's verdict."""

    fingerprint: str
    seen: float
    example: dict[str, Any]
    suggested: dict[str, Any] | None


class Inbox(Protocol):
    async def add(self, sightings: list[Sighting]) -> None: ...

    async def top(self, limit: int) -> tuple[int, list[Group]]: ...

    async def close(self) -> None: ...


class MemoryInbox:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.total = 0
        self._groups: dict[str, Group] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def add_one(self, s: Sighting) -> None:
        self.total += 1
        group = self._groups.get(s.fingerprint)
        if group is None:
            count, error = 1, 0
            if len(self._groups) >= self.capacity:
                lowest = min(self._groups.values(), key=lambda g: g.count)
                del self._groups[lowest.fingerprint]
                count, error = lowest.count + 1, lowest.count
            self._groups[s.fingerprint] = Group(s.fingerprint, count, error, s.seen, s.seen, s.example, s.suggested)
            return
        group.count += 1
        group.last_seen = max(group.last_seen, s.seen)
        if s.suggested is not None:
            group.suggested = s.suggested

    async def add(self, sightings: list[Sighting]) -> None:
        for s in sightings:
            self.add_one(s)

    async def top(self, limit: int) -> tuple[int, list[Group]]:
        groups = sorted(self._groups.values(), key=lambda g: (-g.count, -g.last_seen))[:limit]
        return self.total, groups

    async def close(self) -> None:
        return None


# KEYS: counts ZSET, total counter, this group's HASH. ARGV: fingerprint, seen (epoch s), example JSON,
# suggested JSON or "", capacity, the group HASH prefix (for the group it evicts).
RECORD = """
redis.call('INCR', KEYS[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZINCRBY', KEYS[1], 1, ARGV[1])
else
  local count, error = 1, 0
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) then
    local lowest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    redis.call('ZREM', KEYS[1], lowest[1])
    redis.call('DEL', ARGV[6] .. lowest[1])
    error = tonumber(lowest[2])
    count = error + 1
  end
  redis.call('ZADD', KEYS[1], count, ARGV[1])
  redis.call('HSET', KEYS[3], 'first_seen', ARGV[2], 'example', ARGV[3], 'error', error)
end
redis.call('HSET', KEYS[3], 'last_seen', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], 'suggested', ARGV[4]) end
return 1
"""


class RedisInbox:
    def __init__(self, client: Redis, capacity: int) -> None:
        self.capacity = capacity
        self._client = client
        self._script = client.register_script(RECORD)

    async def add(self, sightings: list[Sighting]) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            for s in sightings:
                await self._script(
                    keys=[COUNTS_KEY, TOTAL_KEY, GROUP_PREFIX + s.fingerprint],
                    args=[s.fingerprint, repr(s.seen), orjson.dumps(s.example),
                          orjson.dumps(s.suggested) if s.suggested is not None else "", self.capacity, GROUP_PREFIX],
                    client=pipe)
            await pipe.execute()

    async def top(self, limit: int) -> tuple[int, list[Group]]:
        # (member, score) pairs as this client gets them (RESP2, bytes); redis-py's annotation is the
        # union over every protocol and decoding.
        ranked = cast(list[tuple[bytes, float]],
                      await self._client.zrevrange(COUNTS_KEY, 0, max(limit, 1) - 1, withscores=True))
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.get(TOTAL_KEY)
            for fingerprint, _ in ranked:
                pipe.hgetall(GROUP_PREFIX + fingerprint.decode())
            total, *hashes = await pipe.execute()
        groups = []
        for (fingerprint, score), fields in zip(ranked, hashes, strict=True):
            if not fields or b"example" not in fields:
                continue  # evicted between the two reads
            suggested = fields.get(b"suggested")
            groups.append(Group(fingerprint.decode(), int(score), int(fields.get(b"error", 0)),
                                float(fields[b"first_seen"]), float(fields[b"last_seen"]),
                                orjson.loads(fields[b"example"]), orjson.loads(suggested) if suggested else None))
        return int(total or 0), groups[:limit]

    async def close(self) -> None:
        await self._client.aclose()
