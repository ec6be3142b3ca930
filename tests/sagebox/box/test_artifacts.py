"""The demo's packaged models are linked where the CDK app looks when build/models holds none."""

from __future__ import annotations

from pathlib import Path

from sagebox.box.artifacts import link_demo_models


def test_the_link_points_at_the_cached_packages_and_follows_a_new_recipe(tmp_path: Path) -> None:
    first, second = tmp_path / "cache" / "r7" / "packages", tmp_path / "cache" / "r8" / "packages"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    link = tmp_path / "build" / "demo-models"
    link_demo_models(first, link)
    assert link.is_symlink() and link.resolve() == first
    link_demo_models(second, link)  # a later recipe's build replaces it
    assert link.resolve() == second
    assert sorted(p.name for p in link.parent.iterdir()) == ["demo-models"]  # no staging link left behind


def test_a_folder_of_that_name_is_left_alone(tmp_path: Path) -> None:
    link = tmp_path / "demo-models"
    (link / "int8").mkdir(parents=True)
    link_demo_models(tmp_path / "packages", link)
    assert not link.is_symlink() and (link / "int8").is_dir()
