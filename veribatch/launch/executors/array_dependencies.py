"""Which array each of a stage's elements goes into, and what that array waits for.

Arrays are *dense*: array index i runs the i-th element of the list submitted (a resume
submits only the incomplete shards, as indices 0..m-1).  A stage that needs another
depends on it element-wise (``aftercorr``) when both arrays hold the same shards, else
(``afterok``) on exactly the upstream elements that run its shards: a verify array per
generate element, not one behind the whole stage.  A shard whose upstream is not
resubmitted but still queued or running in an earlier job waits on exactly those elements
(``afterok``); one with a complete upstream starts at once.  Arrays longer than the
cluster's MaxArraySize are split into chunks.
"""

from __future__ import annotations

from typing import Any

from ..sizing import Unit

Arrays = dict[str, list[tuple[list[Unit], str]]]  # stage → [(units of the array, array id)]


def _units(part: list[int] | list[Unit]) -> list[Unit]:
    return [u if isinstance(u, list) else [u] for u in part]


def dependency_groups(shards: list[int] | list[Unit], needs: list[str],
                      arrays: dict[str, list[tuple[list[int] | list[Unit], str]]],
                      waiting_on: dict[tuple[str, int], str],
                      limit: int) -> list[tuple[list[int] | list[Unit], str | None]]:
    """Split a stage's array elements into arrays by what they must wait for: (elements,
    dependency).  An element is a shard, or a list of shards (a sized GPU stage's element,
    `launch.sizing`); `arrays` holds the upstream arrays of this submission in the same form.

    Elements whose upstream is in this submission wait for exactly the upstream elements
    that run their shards: element-wise (`aftercorr`) when the array lines up with an
    upstream array, else `afterok` on those elements — a generate element covering verify
    shards 0-15 releases those sixteen, not the whole verify stage.  Elements whose upstream
    is still queued or running in an earlier job (`waiting_on`) wait for exactly those
    elements; the rest start at once."""
    plain = bool(shards) and not isinstance(shards[0], list)
    units = _units(list(shards))
    ups = {need: [(_units(list(part)), jid) for part, jid in arrays.get(need, [])]
           for need in needs}
    where: dict[tuple[str, int], tuple[int, int]] = {}  # (need, shard) → (array, element)
    for need, lst in ups.items():
        for a, (us, _) in enumerate(lst):
            for e, u in enumerate(us):
                for k in u:
                    where[(need, k)] = (a, e)

    def old_jobs(unit: Unit) -> list[str]:
        return sorted({waiting_on[(need, k)] for need in needs for k in unit
                       if (need, k) in waiting_on})

    def signature(unit: Unit) -> tuple[Any, ...]:
        sig = []
        for need in needs:
            hits = sorted({where[(need, k)] for k in unit if (need, k) in where})
            if not hits:
                continue
            a, e = hits[0]
            # an element with the same shards as its upstream element (one shard each, or
            # the same group of a grouped stage) may line up array-wise (aftercorr)
            same = len(hits) == 1 and ups[need][a][0][e] == unit
            sig.append((need, a) if same else (need, tuple(hits)))
        return tuple(sig)

    def deps(part: list[Unit]) -> str | None:
        out = []
        for need in needs:
            hit = [where[(need, k)] for u in part for k in u if (need, k) in where]
            if not hit:
                continue
            arrs = sorted({a for a, _ in hit})
            if len(arrs) == 1 and ups[need][arrs[0]][0] == part:
                jid = ups[need][arrs[0]][1]
                out.append(f"{'afterok' if len(part) == 1 else 'aftercorr'}:{jid}")
                continue
            ids = []
            for a in arrs:
                us, jid = ups[need][a]
                elems = sorted({e for aa, e in hit if aa == a})
                ids += [jid] if len(elems) == len(us) else [f"{jid}_{e}" for e in elems]
            out.append("afterok:" + ":".join(ids))
        old = sorted({j for u in part for j in old_jobs(u)})
        if old:
            out.append("afterok:" + ":".join(old))
        return ",".join(out) or None

    linked: dict[tuple[Any, ...], list[Unit]] = {}
    waiting, free = [], []
    for u in units:
        sig = signature(u)
        if sig:
            linked.setdefault(sig, []).append(u)
        elif old_jobs(u):
            waiting.append(u)
        else:
            free.append(u)
    groups: list[tuple[list[Unit], str | None]] = []
    for part in linked.values():
        groups += [(c, deps(c)) for c in chunks(part, limit)]
    groups += [(c, deps(c)) for c in chunks(waiting, limit)]
    groups += [(c, None) for c in chunks(free, limit)]
    if plain:
        return [([u[0] for u in part], dep) for part, dep in groups]
    return [(part, dep) for part, dep in groups]


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]
