"""Build contexts: only what the Dockerfile copies, the CPU torch wheel, the CA bundle, the same bytes every time."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from sagebox.errors import SageboxError
from sagebox.images import builder, context

REPO = Path(__file__).resolve().parents[3]
CPU_TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_TORCH = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
NUMPY = "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"


def wheelhouse(tmp_path: Path, *names: str) -> tuple[Path, ...]:
    folder = tmp_path / "wheels"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_bytes(f"wheel bytes of {name}".encode())
    return tuple(sorted(folder.iterdir()))


def ca_bundle(tmp_path: Path) -> Path:
    path = tmp_path / "ca.crt"
    path.write_text("-----BEGIN CERTIFICATE-----\nMIIB-test-ca\n-----END CERTIFICATE-----\n")
    return path


def inputs(tmp_path: Path, *wheel_names: str, packages: dict[str, Path] | None = None) -> builder.BuildInputs:
    return builder.BuildInputs(
        dockerfile=REPO / "container" / "Dockerfile",
        packages=packages or {"container": REPO / "container", "neuron_emu": tmp_path / "no-neuron-emu"},
        requirements=REPO / "container" / "requirements.txt",
        wheels=wheelhouse(tmp_path, *(wheel_names or (CPU_TORCH, NUMPY))),
        ca_bundle=ca_bundle(tmp_path),
        base_image="localhost/sagebox-base:bookworm",
        tag="sagebox-serving:test",
        optional_packages=("neuron_emu",),
    )


def members(entries: list[context.Entry]) -> dict[str, bytes | None]:
    data, _ = context.tar_bytes(entries)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        out: dict[str, bytes | None] = {}
        for member in tar.getmembers():
            extracted = tar.extractfile(member) if member.isfile() else None
            out[member.name] = extracted.read() if extracted else None
        return out


def test_runtime_context_holds_requirements_cpu_wheels_and_the_ca_bundle_but_no_code(tmp_path: Path) -> None:
    files = members(builder.runtime_entries(inputs(tmp_path)))
    assert set(files) == {
        "Dockerfile",
        "build",
        "build/ca-certificates.crt",
        "container",
        "container/requirements.txt",
        "wheelhouse",
        f"wheelhouse/{CPU_TORCH}",
        f"wheelhouse/{NUMPY}",
    }
    assert files["build/ca-certificates.crt"] == ca_bundle(tmp_path).read_bytes()
    assert files["container/requirements.txt"] == (REPO / "container" / "requirements.txt").read_bytes()
    dockerfile = (files["Dockerfile"] or b"").decode()
    assert "AS runtime" in dockerfile and "AS serving" not in dockerfile


def test_serving_context_is_the_code_on_the_runtime_image(tmp_path: Path) -> None:
    files = members(builder.serving_entries(inputs(tmp_path), "localhost/sagebox-serving-runtime:abc"))
    dockerfile = (files["Dockerfile"] or b"").decode()
    assert [line for line in dockerfile.splitlines() if line.startswith("FROM")] == [
        "FROM localhost/sagebox-serving-runtime:abc AS serving"
    ]
    assert files["container/__main__.py"] == (REPO / "container" / "__main__.py").read_bytes()
    assert "neuron_emu" in files and files["neuron_emu"] is None  # missing optional package: empty directory
    assert not any(name.startswith(("wheelhouse", "build")) for name in files)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)


@pytest.mark.parametrize(
    ("wheel", "reason"),
    [
        (CUDA_TORCH, "not a CPU build"),
        ("nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl", "CUDA package"),
        ("triton-3.5.0-cp311-cp311-manylinux_2_27_x86_64.whl", "CUDA package"),
    ],
)
def test_a_cuda_wheel_stops_the_context(tmp_path: Path, wheel: str, reason: str) -> None:
    names = (wheel, NUMPY) if wheel.startswith("torch") else (CPU_TORCH, wheel)
    with pytest.raises(SageboxError, match=reason):
        builder.runtime_entries(inputs(tmp_path, *names))


def test_a_wheelhouse_without_torch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="no torch wheel"):
        builder.runtime_entries(inputs(tmp_path, NUMPY))


def test_the_context_bytes_do_not_depend_on_file_times_but_on_contents(tmp_path: Path) -> None:
    package = tmp_path / "container"
    shutil.copytree(REPO / "container", package, ignore=shutil.ignore_patterns("__pycache__"))
    made = inputs(tmp_path, packages={"container": package, "neuron_emu": tmp_path / "absent"})
    first, first_digest = context.tar_bytes(builder.full_entries(made))
    for path in package.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    second, second_digest = context.tar_bytes(builder.full_entries(made))
    assert first == second and first_digest == second_digest
    assert context.write_tar(builder.full_entries(made), None) == first_digest
    with (package / "env.py").open("a") as fh:
        fh.write("# a code change\n")
    assert context.tar_bytes(builder.full_entries(made))[1] != first_digest


@pytest.mark.parametrize("name", [".env", "id_rsa", "credentials", "server.pem", "deploy.key", ".pypirc"])
def test_a_file_that_looks_like_a_secret_stops_the_build(tmp_path: Path, name: str) -> None:
    package = tmp_path / "container"
    shutil.copytree(REPO / "container", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "handlers" / name).write_text("AWS_SECRET_ACCESS_KEY=not-for-images\n")
    made = inputs(tmp_path, packages={"container": package, "neuron_emu": tmp_path / "absent"})
    with pytest.raises(SageboxError, match="looks like a secret"):
        builder.serving_entries(made, "img")


def test_caches_and_hidden_files_stay_out(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (package / ".mypy_cache").mkdir()
    (package / ".mypy_cache" / "x.json").write_text("{}")
    (package / "mod.py").write_text("X = 1\n")
    (package / "run.sh").write_text("#!/bin/sh\n")
    (package / "run.sh").chmod(0o755)
    entries = {e.arcname: e for e in context.package_entries("pkg", package)}
    assert set(entries) == {"pkg", "pkg/mod.py", "pkg/run.sh"}
    assert entries["pkg/run.sh"].mode == 0o755 and entries["pkg/mod.py"].mode == 0o644


def test_a_missing_required_package_is_an_error(tmp_path: Path) -> None:
    made = inputs(tmp_path, packages={"container": tmp_path / "nowhere", "neuron_emu": tmp_path / "absent"})
    with pytest.raises(SageboxError, match="does not exist"):
        builder.serving_entries(made, "img")


def test_no_build_argument_carries_a_secret(tmp_path: Path) -> None:
    assert set(inputs(tmp_path).build_args()) == {"BASE_IMAGE"}
    text = (REPO / "container" / "Dockerfile").read_text()
    declared = [line.split()[1].split("=")[0] for line in text.splitlines() if line.startswith(("ARG ", "ENV "))]
    assert declared and not [n for n in declared if any(w in n.upper() for w in ("SECRET", "TOKEN", "PASSWORD"))]


def test_ca_bundle_comes_from_pip_settings_first(tmp_path: Path) -> None:
    mine = ca_bundle(tmp_path)
    assert context.find_ca_bundle({"PIP_CERT": str(mine)}) == mine
    assert context.find_ca_bundle({"PIP_CERT": str(tmp_path / "gone.crt"), "SSL_CERT_FILE": str(mine)}) == mine
    system = context.CA_BUNDLE_CANDIDATES[1]
    assert context.find_ca_bundle({}, exists=lambda p: p == system) == system
