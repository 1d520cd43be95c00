"""The trivial generator: random mutations of the problem's example input, no model, no reasoning.

It drives the model-free reference rows: the oracle RandSearch with a trivial generator,
and the blind random row when a dataset ships no blind generator of its own.  It knows
nothing about the problem beyond the shape of its example: the example's lines and tokens
are kept, and each draw mutates a few tokens — integers to boundary values (0, 1, -1, the
example's own values, powers of ten, 2^31 - 1...) or to neighbours and multiples, words to
shuffles, repeats or truncations of themselves.  Most draws break some constraint; the
validator (run inside the search) throws those away, so what is left are valid inputs
close to the example — exactly where off-by-one and special-case bugs live.

Draws are seeded from the instance id, so a search sees the same sequence on every run
(its length still depends on the time limit and the machine).
"""

from __future__ import annotations

import hashlib
import random
import re

_INT = re.compile(r"^-?\d+$")
_SPECIAL = (0, 1, 2, -1, 3, 10, 100, 1000, 10**5, 2 * 10**5, 10**9, 10**9 + 7, 2**31 - 1,
            2**31, 10**18, 2**63 - 1)


def seed_for(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


class ExampleFuzzer:
    """`draw(i)` → the i-th mutated example (bytes); deterministic for a given seed."""

    def __init__(self, example: str, seed: int) -> None:
        self.lines = [line.split(" ") for line in example.rstrip("\n").split("\n")]
        self.ints = sorted({int(t) for line in self.lines for t in line if _INT.match(t)})
        self.rng = random.Random(seed)

    def _int(self, v: int) -> int:
        r = self.rng.random()
        if r < 0.35:
            return self.rng.choice(_SPECIAL)
        if r < 0.55 and self.ints:
            return self.rng.choice(self.ints)
        if r < 0.8:
            return v + self.rng.choice((-2, -1, 1, 2))
        if r < 0.9:
            return -v
        return v * self.rng.choice((2, 10, 1000))

    def _word(self, w: str) -> str:
        r = self.rng.random()
        if r < 0.3 and len(w) > 1:
            chars = list(w)
            self.rng.shuffle(chars)
            return "".join(chars)
        if r < 0.55:
            return w[: self.rng.randint(1, len(w))]
        if r < 0.8:
            return w + self.rng.choice(w)
        return self.rng.choice(w) * self.rng.randint(1, max(1, len(w)))

    def draw(self, i: int) -> bytes:
        del i  # the sequence is the generator's state; `i` is the search's draw counter
        tokens = [(li, ti) for li, line in enumerate(self.lines) for ti in range(len(line))]
        lines = [list(line) for line in self.lines]
        if tokens:
            k = 1 + min(len(tokens) - 1, int(self.rng.expovariate(0.7)))
            for li, ti in self.rng.sample(tokens, k):
                tok = lines[li][ti]
                lines[li][ti] = str(self._int(int(tok))) if _INT.match(tok) else (
                    self._word(tok) if tok else tok)
        return ("\n".join(" ".join(line) for line in lines) + "\n").encode()
