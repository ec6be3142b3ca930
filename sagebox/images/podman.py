"""podman from Debian as a Docker-API engine: packages, project-local configuration, and the API service."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from sagebox.errors import SageboxError
from sagebox.images.dirs import Paths

# What builds and runs OCI images here (FACTS.md, "Real containers without a Docker engine").
PACKAGES = (
    "podman",
    "buildah",
    "runc",
    "fuse-overlayfs",
    "slirp4netns",
    "uidmap",
    "mmdebstrap",
    "containernetworking-plugins",
    "golang-github-containers-common",
    "iptables",
    "conmon",
    "catatonit",
    # The box's local OCI registry behind the embedded ECR (sagebox/box/registry.py).
    "docker-registry",
)

Runner = Callable[..., subprocess.CompletedProcess[str]]


def containers_conf(tmp_dir: Path) -> str:
    # crun fails on hybrid cgroups here; the journald events logger needs systemd.
    return (
        "# Written by `sagebox containers setup`.\n"
        "[containers]\n"
        'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
        "\n"
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        f'tmp_dir = "{tmp_dir}"\n'
    )


def storage_conf(graphroot: Path, runroot: Path) -> str:
    # overlay, not vfs: vfs copies the whole image for every container (~15 s each).
    return (
        "# Written by `sagebox containers setup`.\n"
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{graphroot}"\n'
        f'runroot = "{runroot}"\n'
    )


def podman_env(paths: Paths, base: Mapping[str, str]) -> dict[str, str]:
    return {**base, "CONTAINERS_CONF": str(paths.containers_conf), "CONTAINERS_STORAGE_CONF": str(paths.storage_conf)}


def parse_dpkg_status(output: str) -> set[str]:
    """Installed package names from `dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n'` output."""
    installed = set()
    for line in output.splitlines():
        status, _, name = line.partition(" ")
        name = name.strip().split(":")[0]
        if status.startswith("ii") and name:
            installed.add(name)
    return installed


def missing_packages(installed: Iterable[str], wanted: Sequence[str] = PACKAGES) -> list[str]:
    have = set(installed)
    return [name for name in wanted if name not in have]


def installed_packages(run: Runner, names: Sequence[str] = PACKAGES) -> set[str]:
    try:
        result = run(
            ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package}\n", *names],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return set()
    return parse_dpkg_status(result.stdout)


def install_packages(run: Runner, names: Sequence[str], is_root: bool, log: Callable[[str], None]) -> None:
    """`apt-get install` the missing packages (Debian/Ubuntu, as root)."""
    if not names:
        return
    hint = f"apt-get install {' '.join(names)}"
    if not is_root:
        raise SageboxError(f"podman packages are missing; run as root or install them: sudo {hint}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(f"installing {', '.join(names)} with apt-get")
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *names],
    ):
        try:
            result = run(argv, capture_output=True, text=True, check=False, env=env)
        except FileNotFoundError:
            raise SageboxError(
                f"no Docker engine answers and apt-get is missing: install podman or Docker ({hint})"
            ) from None
        if result.returncode != 0:
            last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SageboxError(f"`{' '.join(argv[:2])}` failed ({result.returncode}): {last[0]}")


def write_config(paths: Paths) -> None:
    """Write the project-local containers.conf and storage.conf (only when their text changes)."""
    graphroot, runroot, tmp_dir = paths.podman / "storage", paths.podman / "run", paths.podman / "tmp"
    for directory in (paths.podman, graphroot, runroot, tmp_dir):
        directory.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (paths.containers_conf, containers_conf(tmp_dir)),
        (paths.storage_conf, storage_conf(graphroot, runroot)),
    ):
        if not path.is_file() or path.read_text() != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)


def start_service(
    paths: Paths,
    answers: Callable[[], bool],
    timeout_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Start `podman system service` on the project socket, detached; return its pid once the API answers."""
    sock = paths.socket
    sock.parent.mkdir(parents=True, exist_ok=True)
    sock.unlink(missing_ok=True)  # a stale socket from a service that died
    with paths.service_log.open("ab") as log:
        process = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{sock}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=podman_env(paths, os.environ),
            start_new_session=True,  # outlives this command, like a daemon
        )
    paths.service_pid.write_text(f"{process.pid}\n")
    deadline = clock() + timeout_s
    while clock() < deadline:
        if process.poll() is not None:
            raise SageboxError(
                f"podman system service exited with {process.returncode}: {last_line(paths.service_log)}"
            )
        if answers():
            return process.pid
        sleep(0.1)
    raise SageboxError(f"podman system service did not answer on {sock} within {timeout_s:.0f}s")


def stop_service(paths: Paths, timeout_s: float = 10.0) -> bool:
    """Stop the service this project started (by its recorded pid); False when none was running."""
    try:
        pid = int(paths.service_pid.read_text().strip())
    except (OSError, ValueError):
        return False
    if not _is_podman_service(pid):
        paths.service_pid.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _is_podman_service(pid):
        time.sleep(0.1)
    if _is_podman_service(pid):
        os.kill(pid, signal.SIGKILL)
    paths.service_pid.unlink(missing_ok=True)
    paths.socket.unlink(missing_ok=True)
    return True


def _is_podman_service(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]
    program = Path(cmdline[0].decode(errors="replace")).name
    return not zombie and program == "podman" and b"service" in cmdline


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "no log"


def mounts_under(root: Path, mounts_text: str) -> list[Path]:
    """Mount points at or below `root` in /proc/self/mounts text, deepest first (the order to unmount them)."""
    found = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        point = Path(fields[1].replace("\\040", " "))
        if point == root or point.is_relative_to(root):
            found.append(point)
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def reset(paths: Paths, run: Runner, log: Callable[[str], None]) -> None:
    """Stop the service, remove every container and build container, unmount and delete the project's storage."""
    if stop_service(paths):
        log("stopped the podman service")
    env = podman_env(paths, os.environ)
    if paths.storage_conf.is_file():
        for argv in (["podman", "rm", "--all", "--force"], ["buildah", "rm", "--all"]):
            with contextlib.suppress(FileNotFoundError):
                run(argv, capture_output=True, text=True, check=False, env=env)
    for point in mounts_under(paths.podman, Path("/proc/self/mounts").read_text()):
        run(["umount", "--lazy", str(point)], capture_output=True, text=True, check=False)
    shutil.rmtree(paths.podman, ignore_errors=True)
    log(f"removed {paths.podman}")
