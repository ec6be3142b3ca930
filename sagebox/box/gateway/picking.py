"""Which fleet, variant and instance answer an invocation, and which shadows get a copy of it.

During a blue/green update an endpoint has two fleets, each with its share of the traffic (sagebox.box.routes);
within a fleet a variant is chosen by weight, or is the caller's TargetVariant; its instances answer in turn. A
shadow variant gets a copy with the probability of its sampled share. Random choices come from generators that tests
and `SAGEBOX_GATEWAY_SEED` can seed, one per endpoint, so a split is the same every run.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from sagebox.box.routes import Route, VariantRoute


@dataclass(frozen=True)
class Choice:
    config: str  # the endpoint config of the fleet that answers
    variant: VariantRoute
    fleet_size: int  # instances of this variant in that fleet


class Picker:
    """Which fleet answers (by its share of traffic during a blue/green update), which variant (by weight, or the
    caller's TargetVariant), which of its instances (in turn), and whether a shadow gets a copy (its sampled share).

    `rng` is one generator for every endpoint (tests); else each endpoint has its own, seeded from `seed` and the
    endpoint's name when a seed is given, so one endpoint's sequence of choices does not depend on others' traffic."""

    def __init__(self, rng: random.Random | None = None, seed: int | None = None) -> None:
        self._shared = rng
        self._seed = seed
        self._rngs: dict[str, random.Random] = {}
        self._turns: dict[tuple[str, str, tuple[str, ...]], Iterator[str]] = {}

    def rng(self, endpoint: str) -> random.Random:
        if self._shared is not None:
            return self._shared
        found = self._rngs.get(endpoint)
        if found is None:
            found = self._rngs[endpoint] = random.Random(None if self._seed is None else f"{self._seed}:{endpoint}")
        return found

    def choose(self, route: Route, target: str | None) -> Choice | None:
        rng = self.rng(route.endpoint)
        fleets = route.fleets()
        if target:
            having = [(config, share, v) for config, share, variants in fleets for v in variants if v.name == target]
            if not having:
                return None
            config, _, variant = (
                having[0] if len(having) == 1 else rng.choices(having, weights=[h[1] for h in having])[0]
            )
            return Choice(config, variant, len(variant.urls))
        if len(fleets) == 1:
            config, _, variants = fleets[0]
        else:
            config, _, variants = rng.choices(fleets, weights=[f[1] for f in fleets])[0]
        if not variants:
            return None
        weights = [max(0.0, v.weight) for v in variants]
        chosen = variants[0] if sum(weights) <= 0 else rng.choices(variants, weights=weights)[0]
        return Choice(config, chosen, len(chosen.urls))

    def mirrored(self, route: Route) -> list[VariantRoute]:
        """The shadows that get a copy of this request: each with the probability of its sampled share."""
        rng = self.rng(route.endpoint)
        return [s for s in route.shadows if s.weight >= 1 or (s.weight > 0 and rng.random() < s.weight)]

    def variant(self, route: Route, target: str | None) -> VariantRoute | None:
        choice = self.choose(route, target)
        return choice.variant if choice else None

    def url(self, route: Route, variant: VariantRoute) -> str | None:
        if not variant.urls:
            return None
        key = (route.endpoint, variant.name, variant.urls)
        turn = self._turns.get(key)
        if turn is None:
            turn = self._turns[key] = itertools.cycle(variant.urls)
        return next(turn)
