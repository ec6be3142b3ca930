"""The box's small parts: the environment it exports, the registry's files, the embedded AWS patches' pure pieces,
the gateway's routing choices and its body limit."""

from __future__ import annotations

import random
import ssl
from pathlib import Path

import pytest

from sagebox.box import registry
from sagebox.box.environment import UNSET, box_environment, shell_lines
from sagebox.box.routes import Route, VariantRoute, load_routes, save_routes
from sagebox.box.state import BoxState


def state(**fields: str) -> BoxState:
    return BoxState(aws_url="http://localhost:4566", gateway_url="http://localhost:4567", **fields)  # type: ignore[arg-type]


def test_env_points_every_sdk_at_the_box_and_unsets_real_credentials() -> None:
    env = box_environment(state())
    assert env["AWS_ENDPOINT_URL"] == "http://localhost:4566"
    assert env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"] == "http://localhost:4567"
    assert env["AWS_ACCESS_KEY_ID"] == env["AWS_SECRET_ACCESS_KEY"] == "testing"
    assert "DOCKER_HOST" not in env and "SAGEBOX_BASE_IMAGE" not in env
    assert env["SAGEBOX_ALLOW_EMULATED"] == "1"  # the box serves emulator-compiled Neuron models on CPU
    lines = shell_lines(state())
    assert lines[1] == f"unset {' '.join(UNSET)}" and "AWS_PROFILE" in UNSET
    assert any("no container engine" in line for line in lines)
    offline = box_environment(state(docker_host="unix:///x.sock", base_image="localhost/b:1", wheelhouse="build/w"))
    assert offline["DOCKER_HOST"] == "unix:///x.sock" and offline["SAGEBOX_WHEELHOUSE"] == "build/w"
    quoted = shell_lines(state(base_image="a b"))
    assert "export SAGEBOX_BASE_IMAGE='a b'" in quoted  # shell-safe


def test_env_names_the_aws_proxy_and_the_boxs_ca_bundle_in_the_standard_variables() -> None:
    boxed = state(aws_proxy_url="http://127.0.0.1:4568", ca_bundle="/s/aws-proxy/ca-bundle.pem")
    env = box_environment(boxed, {"NO_PROXY": "intranet.example", "HTTPS_PROXY": "http://corp:3128"})
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "SAGEBOX_AWS_PROXY"):
        assert env[name] == "http://127.0.0.1:4568"
    for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == "/s/aws-proxy/ca-bundle.pem"
    # The box's own endpoints (localhost) are reached directly; the shell's exceptions and proxy are kept.
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1,intranet.example"
    assert env["SAGEBOX_UPSTREAM_PROXY"] == "http://corp:3128"
    # A second `eval "$(sagebox env)"` in that shell: the upstream is the shell's first proxy, never the box's.
    again = box_environment(boxed, {**env})
    assert again["SAGEBOX_UPSTREAM_PROXY"] == "http://corp:3128" and again["NO_PROXY"] == env["NO_PROXY"]
    assert "HTTPS_PROXY" not in box_environment(state(), {})  # a box without the proxy names none


def test_the_registry_certificate_is_for_its_address_and_trusted_where_podman_looks(tmp_path: Path) -> None:
    files = registry.RegistryFiles(tmp_path / "registry")
    registry.make_certificate(files.cert, files.key, "127.0.0.1")
    first = files.cert.read_bytes()
    registry.make_certificate(files.cert, files.key, "127.0.0.1")
    assert files.cert.read_bytes() == first  # made once, reused
    assert files.key.stat().st_mode & 0o077 == 0
    context = ssl.create_default_context(cafile=str(files.cert))  # a valid PEM CA
    assert context.cert_store_stats()["x509_ca"] == 1
    config = registry.config_text(files, "127.0.0.1:5999")
    assert "addr: 127.0.0.1:5999" in config and str(files.storage) in config and str(files.cert) in config
    trusted = registry.trust("127.0.0.1:5999", files.cert, certs_d=tmp_path / "certs.d")
    assert trusted == tmp_path / "certs.d" / "127.0.0.1:5999" / "ca.crt" and trusted.read_bytes() == first
    registry.untrust("127.0.0.1:5999", certs_d=tmp_path / "certs.d")
    assert not trusted.parent.exists()


def test_ecr_image_names_map_to_the_local_registry() -> None:
    from sagebox.box.embedded_aws.ecr import registry_reference

    uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-assets:abc"
    assert registry_reference(uri, "127.0.0.1:5000") == "127.0.0.1:5000/cdk-assets:abc"
    digest = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/qa@sha256:" + "a" * 64
    assert registry_reference(digest, "h:1") == "h:1/team/qa@sha256:" + "a" * 64
    assert registry_reference("docker.io/library/python:3.11", "h:1") is None


def test_cloudformation_tags_become_kms_tags() -> None:
    from sagebox.box.embedded_aws.kms import cfn_tags_to_kms

    assert cfn_tags_to_kms([{"Key": "a", "Value": "1"}, {"TagKey": "b", "TagValue": "2"}]) == [
        {"TagKey": "a", "TagValue": "1"},
        {"TagKey": "b", "TagValue": "2"},
    ]


@pytest.mark.parametrize(
    ("instance_type", "accepted"),
    [("ml.c6i.xlarge", True), ("ml.inf2.48xlarge", True), ("ml.c6i.hugelarge", False), ("c6i.xlarge", False)],
)
def test_current_instance_types_are_accepted_and_typos_are_not(instance_type: str, accepted: bool) -> None:
    from sagebox.box.embedded_aws.endpoint_configs import current_type

    assert current_type(instance_type) is accepted


def test_routes_round_trip_and_variants_are_picked_by_weight_or_by_target(tmp_path: Path) -> None:
    from sagebox.box.runtime_gateway import Picker

    route = Route("ep", (VariantRoute("A", 0.9, ("http://a1", "http://a2")), VariantRoute("B", 0.1, ("http://b1",))))
    save_routes(tmp_path / "routes.json", {"ep": route})
    assert load_routes(tmp_path / "routes.json") == {"ep": route}
    picker = Picker(random.Random(7))
    picks = [picker.variant(route, None) for _ in range(2000)]
    share = sum(1 for v in picks if v is not None and v.name == "A") / len(picks)
    assert 0.87 <= share <= 0.93  # seeded: the same every run
    assert picker.variant(route, "B") == route.variants[1]
    assert picker.variant(route, "C") is None
    first = route.variants[0]
    assert [picker.url(route, first) for _ in range(4)] == ["http://a1", "http://a2", "http://a1", "http://a2"]
    assert picker.url(route, VariantRoute("empty", 1.0, ())) is None


def test_the_gateway_refuses_a_large_body_without_reading_it() -> None:
    import asyncio

    from starlette.requests import Request

    from sagebox.box.runtime_gateway import BodyTooLarge, read_limited

    chunks_read: list[int] = []

    def request(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> Request:
        pending = list(chunks)

        async def receive() -> dict[str, object]:
            chunk = pending.pop(0)
            chunks_read.append(len(chunk))
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

        return Request({"type": "http", "method": "POST", "headers": headers, "path": "/"}, receive)

    declared = request([(b"content-length", b"7000000")], [b"x" * 10])
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_limited(declared, 6 * 1024 * 1024))
    assert chunks_read == []  # refused on the header alone
    streamed = request([], [b"x" * 4_000_000, b"x" * 4_000_000, b"x" * 4_000_000])
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_limited(streamed, 6 * 1024 * 1024))
    assert chunks_read == [4_000_000, 4_000_000]  # stopped at the chunk that crossed the limit
    small = request([], [b"ab", b"cd"])
    assert asyncio.run(read_limited(small, 10)) == b"abcd"


def test_the_reason_a_model_did_not_load_is_read_from_the_container_log() -> None:
    from sagebox.box.fleet import load_failure

    lines = [
        "2026-12-01 INFO sagebox.server [pid 7] loading model from /opt/ml/model",
        "2026-12-01 ERROR sagebox.server [pid 7] model refused: model is tampered: sha256 mismatch for model.onnx",
        "2026-12-01 INFO uvicorn.error [pid 7] Application startup complete.",
    ]
    assert load_failure(lines) == "model refused: model is tampered: sha256 mismatch for model.onnx"
    assert load_failure(["model failed to load: OSError: disk"]) == "model failed to load: OSError: disk"
    assert load_failure(["nothing to see"]) is None
