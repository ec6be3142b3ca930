"""Engine choice, podman configuration, the base image recipe and the wheelhouse target: the pure parts of set-up."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sagebox.errors import SageboxError
from sagebox.images import base_image, engine, podman, wheelhouse
from sagebox.images.dirs import MAX_SOCKET_PATH, Paths, socket_path


def never_probed() -> bool:
    raise AssertionError("the Docker socket must not be probed when DOCKER_HOST is set")


def test_docker_host_wins_without_probing(tmp_path: Path) -> None:
    chosen = engine.choose_engine({"DOCKER_HOST": "tcp://127.0.0.1:2375"}, never_probed, tmp_path / "p.sock")
    assert (chosen.kind, chosen.base_url) == ("docker", "tcp://127.0.0.1:2375")


def test_a_docker_engine_on_its_socket_is_used_before_podman(tmp_path: Path) -> None:
    chosen = engine.choose_engine({}, lambda: True, tmp_path / "p.sock")
    assert (chosen.kind, chosen.base_url) == ("docker", "unix:///var/run/docker.sock")


def test_podman_on_the_project_socket_otherwise(tmp_path: Path) -> None:
    chosen = engine.choose_engine({"DOCKER_HOST": "  "}, lambda: False, tmp_path / "p.sock")
    assert (chosen.kind, chosen.base_url) == ("podman", f"unix://{tmp_path / 'p.sock'}")


def test_nothing_answers_on_a_missing_socket(tmp_path: Path) -> None:
    assert engine.answers(f"unix://{tmp_path / 'missing.sock'}") is False


def test_socket_path_stays_short_enough_for_a_unix_socket(tmp_path: Path) -> None:
    assert socket_path(tmp_path) == tmp_path / "podman.sock"
    deep = Path("/work") / ("d" * 120) / ".sagebox" / "podman"
    chosen = socket_path(deep)
    assert len(str(chosen)) <= MAX_SOCKET_PATH and chosen != socket_path(deep.with_name("other"))


def test_state_is_project_local_and_the_cache_per_user(tmp_path: Path) -> None:
    paths = Paths.from_env({"HOME": str(tmp_path / "home")}, repo=tmp_path / "repo")
    assert paths.containers_conf == tmp_path / "repo" / ".sagebox" / "podman" / "containers.conf"
    assert paths.base_images == tmp_path / "home" / ".cache" / "sagebox" / "base-images"
    env = {"SAGEBOX_STATE_DIR": str(tmp_path / "s"), "SAGEBOX_CACHE_DIR": str(tmp_path / "c")}
    moved = Paths.from_env(env, repo=tmp_path / "repo")
    # A box's state dir does not move the engine: one podman (storage, build cache) per checkout.
    assert (moved.state, moved.cache) == (tmp_path / "repo" / ".sagebox", tmp_path / "c")


def test_repo_ignores_the_state_dir() -> None:
    ignored = (Path(__file__).resolve().parents[3] / ".gitignore").read_text().split()
    assert ".sagebox/" in ignored


def test_podman_configuration_holds_the_settings_that_work_here(tmp_path: Path) -> None:
    paths = Paths(repo=tmp_path, state=tmp_path / ".sagebox", cache=tmp_path / "cache")
    podman.write_config(paths)
    containers = tomllib.loads(paths.containers_conf.read_text())
    storage = tomllib.loads(paths.storage_conf.read_text())
    assert containers["engine"]["runtime"] == "runc"
    assert containers["engine"]["cgroup_manager"] == "cgroupfs"
    assert containers["engine"]["events_logger"] == "file"
    assert containers["containers"]["default_ulimits"] == ["nofile=4096:4096", "nproc=4096:4096"]
    assert storage["storage"]["driver"] == "overlay"
    assert Path(storage["storage"]["graphroot"]).is_dir()
    assert Path(storage["storage"]["graphroot"]).is_relative_to(paths.state)
    env = podman.podman_env(paths, {"PATH": "/usr/bin"})
    assert env["CONTAINERS_CONF"] == str(paths.containers_conf) and env["PATH"] == "/usr/bin"


def test_dpkg_status_gives_the_missing_packages() -> None:
    output = "ii  podman\nii  runc\nrc  buildah\nun  catatonit\nii  iptables:amd64\n"
    installed = podman.parse_dpkg_status(output)
    assert installed == {"podman", "runc", "iptables"}
    missing = podman.missing_packages(installed)
    assert "buildah" in missing and "catatonit" in missing and "podman" not in missing
    assert missing == [p for p in podman.PACKAGES if p not in installed]


def test_installing_needs_root_and_says_what_to_run() -> None:
    def runner(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise AssertionError("apt-get must not run without root")

    with pytest.raises(SageboxError, match="sudo apt-get install podman runc"):
        podman.install_packages(runner, ["podman", "runc"], is_root=False, log=print)


def test_an_apt_failure_is_one_line() -> None:
    calls: list[list[str]] = []

    def runner(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        code = 100 if argv[1] == "install" else 0
        return subprocess.CompletedProcess(argv, code, "", "Reading lists\nE: Unable to locate package podman\n")

    with pytest.raises(SageboxError, match=r"^`apt-get install` failed \(100\): E: Unable to locate package podman$"):
        podman.install_packages(runner, ["podman"], is_root=True, log=lambda line: None)
    assert [c[:2] for c in calls] == [["apt-get", "update"], ["apt-get", "install"]]


def test_base_recipe_is_minbase_bookworm_amd64_with_python_and_certificates(tmp_path: Path) -> None:
    recipe = base_image.BaseRecipe()
    argv = recipe.argv(tmp_path / "out.tar")
    assert argv[0] == "mmdebstrap" and "--variant=minbase" in argv and "--architectures=amd64" in argv
    assert "--include=python3,python3-venv,ca-certificates" in argv
    assert argv[argv.index(str(tmp_path / "out.tar")) - 1] == "bookworm"
    assert "deb http://deb.debian.org/debian-security bookworm-security main" in argv
    assert recipe.image == f"localhost/sagebox-base:bookworm-{recipe.digest()}"
    assert base_image.BaseRecipe(packages=("python3",)).digest() != recipe.digest()
    assert base_image.rootfs_path(tmp_path, recipe).name == f"sagebox-base-{recipe.tag}.tar"


def test_the_cached_root_filesystem_is_reused(tmp_path: Path) -> None:
    recipe = base_image.BaseRecipe()
    cached = base_image.rootfs_path(tmp_path, recipe)
    cached.write_bytes(b"rootfs")

    def runner(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise AssertionError("mmdebstrap must not run when the tarball is cached")

    assert base_image.ensure_rootfs(tmp_path, recipe, runner, print) == cached


def test_a_failed_mmdebstrap_leaves_nothing_behind(tmp_path: Path) -> None:
    def runner(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        Path(argv[argv.index("bookworm") + 1]).write_bytes(b"half a tarball")
        return subprocess.CompletedProcess(argv, 1, "", "E: cannot reach the mirror\n")

    with pytest.raises(SageboxError, match="mmdebstrap failed \\(1\\): E: cannot reach the mirror"):
        base_image.ensure_rootfs(tmp_path, base_image.BaseRecipe(), runner, lambda line: None)
    assert list(tmp_path.iterdir()) == []


def test_imported_image_id_is_read_from_the_progress_stream() -> None:
    stream = '{"status":"Importing"}\n{"status":"sha256:' + "a" * 64 + '","progress":""}\n'
    assert base_image.imported_id(stream) == "sha256:" + "a" * 64
    with pytest.raises(SageboxError, match="did not report an image id"):
        base_image.imported_id('{"status":"Importing"}')


def test_wheelhouse_targets_bookworm_cpython_311_on_x86_64(tmp_path: Path) -> None:
    target = wheelhouse.Target()
    platforms = target.platforms()
    assert platforms[0] == "manylinux_2_36_x86_64" and "manylinux_2_17_x86_64" in platforms
    assert "manylinux2014_x86_64" in platforms and not any("aarch64" in p for p in platforms)
    argv = wheelhouse.download_argv(tmp_path / "r.txt", tmp_path / "w", target, python="python3")
    assert argv[:4] == ["python3", "-m", "pip", "download"] and "--only-binary=:all:" in argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--abi"] == ["cp311", "abi3", "none"]
    assert wheelhouse.key("torch==2.13.0\n", target) != wheelhouse.key("torch==2.13.1\n", target)


def test_wheelhouse_problems_name_each_cuda_wheel() -> None:
    assert wheelhouse.problems(["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]) == []
    found = wheelhouse.problems(
        ["torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "nvidia_nccl_cu12-2.27.3-py3-none-any.whl"]
    )
    assert len(found) == 2 and "not a CPU build" in found[0] and "CUDA package" in found[1]


def test_reset_unmounts_the_deepest_mounts_under_the_project_first(tmp_path: Path) -> None:
    root = tmp_path / "podman"
    mounts = (
        f"/dev/vda {root}/storage/overlay ext4 rw 0 0\n"
        f"overlay {root}/storage/overlay/abc/merged overlay rw 0 0\n"
        f"/dev/vda {tmp_path}/podman-other ext4 rw 0 0\n"
        "proc /proc proc rw 0 0\n"
    )
    assert podman.mounts_under(root, mounts) == [
        root / "storage/overlay/abc/merged",
        root / "storage/overlay",
    ]
