"""How the gateway picks who answers (sagebox.box.gateway.picking): the fleets of a blue/green update by their share,
a TargetVariant found in either fleet, weights that are zero or negative, instances in turn, shadows by their sampled
share, and seeded generators that keep each endpoint's choices independent of other endpoints' traffic."""

from __future__ import annotations

import random
from collections import Counter

from sagebox.box.gateway.picking import Choice, Picker
from sagebox.box.routes import FleetRoute, Route, VariantRoute

OLD = VariantRoute("AllTraffic", 1.0, ("http://old1", "http://old2"))
NEW = VariantRoute("AllTraffic", 1.0, ("http://new1",))


def updating(share: float) -> Route:
    return Route("ep", (OLD,), "cfg-old", FleetRoute("cfg-new", share, (NEW,)))


def test_the_new_fleet_answers_its_share_and_the_choice_says_which_fleet_and_how_big() -> None:
    picker = Picker(random.Random(11))
    configs = Counter(choice.config for choice in (picker.choose(updating(0.3), None) for _ in range(4000)) if choice)
    assert abs(configs["cfg-new"] / 4000 - 0.3) <= 0.03  # seeded: the same every run
    assert picker.choose(updating(0.3), None) in (Choice("cfg-old", OLD, 2), Choice("cfg-new", NEW, 1))
    assert {picker.choose(updating(0.0), None) for _ in range(50)} == {Choice("cfg-old", OLD, 2)}
    assert {picker.choose(updating(1.0), None) for _ in range(50)} == {Choice("cfg-new", NEW, 1)}


def test_a_target_variant_is_found_in_whichever_fleet_has_it() -> None:
    only_new = VariantRoute("Candidate", 1.0, ("http://c1",))
    route = Route("ep", (OLD,), "cfg-old", FleetRoute("cfg-new", 0.01, (NEW, only_new)))
    picker = Picker(random.Random(3))
    assert {picker.choose(route, "Candidate") for _ in range(20)} == {Choice("cfg-new", only_new, 1)}
    assert picker.choose(route, "Missing") is None
    assert picker.choose(route, "") == picker.choose(route, "") is not None  # empty: no target, a weighted pick


def test_variants_without_positive_weight_are_never_picked_unless_none_has_one() -> None:
    a = VariantRoute("A", -1.0, ("http://a",))
    b = VariantRoute("B", 2.0, ("http://b",))
    picker = Picker(random.Random(5))
    assert {c.variant.name for c in (picker.choose(Route("ep", (a, b)), None) for _ in range(200)) if c} == {"B"}
    zero = (VariantRoute("Z1", 0.0, ("http://z1",)), VariantRoute("Z2", 0.0, ("http://z2",)))
    assert {picker.variant(Route("ep", zero), None) for _ in range(20)} == {zero[0]}  # the first, not an error
    assert picker.choose(Route("ep", ()), None) is None


def test_instances_answer_in_turn_and_a_changed_fleet_starts_its_own_turn() -> None:
    picker = Picker(random.Random(1))
    route = Route("ep", (OLD,))
    assert [picker.url(route, OLD) for _ in range(3)] == ["http://old1", "http://old2", "http://old1"]
    grown = VariantRoute("AllTraffic", 1.0, ("http://old1", "http://old2", "http://old3"))
    assert [picker.url(route, grown) for _ in range(3)] == ["http://old1", "http://old2", "http://old3"]
    other = Route("other", (OLD,))
    assert picker.url(other, OLD) == "http://old1"  # another endpoint's turn is its own
    assert picker.url(route, OLD) == "http://old2"  # this one resumes where it was


def test_a_shadow_gets_a_copy_always_never_or_by_its_share() -> None:
    def with_shadows(*weights: float) -> Route:
        shadows = tuple(VariantRoute(f"S{i}", w, ("http://s",)) for i, w in enumerate(weights))
        return Route("ep", (OLD,), shadows=shadows)

    picker = Picker(random.Random(9))
    assert [s.name for s in picker.mirrored(with_shadows(1.0, 0.0, -0.5))] == ["S0"]
    copies = Counter(s.name for _ in range(4000) for s in picker.mirrored(with_shadows(0.1, 0.6)))
    assert abs(copies["S0"] / 4000 - 0.1) <= 0.02 and abs(copies["S1"] / 4000 - 0.6) <= 0.03


def test_a_seeded_endpoint_chooses_the_same_whatever_other_endpoints_receive() -> None:
    def route(endpoint: str) -> Route:
        return Route(endpoint, (VariantRoute("A", 0.5, ("http://a",)), VariantRoute("B", 0.5, ("http://b",))))

    def picks_of_ep(picker: Picker, interleave: bool) -> list[str]:
        names = []
        for _ in range(40):
            if interleave:
                picker.variant(route("noisy"), None)
            found = picker.variant(route("ep"), None)
            assert found is not None
            names.append(found.name)
        return names

    alone = picks_of_ep(Picker(seed=4), interleave=False)
    assert picks_of_ep(Picker(seed=4), interleave=True) == alone
    assert picks_of_ep(Picker(seed=5), interleave=False) != alone  # the seed matters (40 fair coins agree ~never)
    # Each endpoint's generator is seeded with its name too: two endpoints do not split their traffic in lockstep.
    picker = Picker(seed=4)
    others = [picker.variant(route("other"), None) for _ in range(40)]
    assert others != [picker.variant(route("ep"), None) for _ in range(40)]
    shared = random.Random(4)
    assert Picker(rng=shared).rng("ep") is Picker(rng=shared).rng("other") is shared  # tests' one generator
