"""The control plane with endpoint types, on stand-ins (test_reconciler.py's backend, launcher and instances) and an
injected clock: weighted production variants, a shadow variant's own instances, a serverless variant scaled to zero
after its idle period and started again when a request waits, an asynchronous config handed to the gateway, and what
DescribeEndpoint reports of each. A serverless container gets its memory limit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagebox.box import serverless
from sagebox.box.containers import ContainerLauncher, container_limits
from sagebox.box.reconciler import Reconciler, load_fleet
from sagebox.box.routes import load_routes
from sagebox.box.specs import Serverless, VariantSpec
from tests.sagebox.box.test_reconciler import (
    StandInBackend,
    StandInEndpoint,
    StandInLauncher,
    StandInModel,
    healthy,
)

ASYNC = {
    "OutputConfig": {
        "S3OutputPath": "s3://results/out/",
        "NotificationConfig": {"SuccessTopic": "arn:aws:sns:us-east-1:123456789012:done"},
    }
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def add_config(backend: StandInBackend, config: str, variants: list[dict[str, Any]], **extra: Any) -> None:
    for variant in variants:
        model = variant["ModelName"]
        backend.models[model] = StandInModel(
            {"ModelName": model, "PrimaryContainer": {"Image": "img:1", "ModelDataUrl": f"s3://m/{model}.tar.gz"}}
        )
    backend.configs[config] = {"ProductionVariants": variants, **extra}


def instance_variant(name: str, weight: float = 1.0) -> dict[str, Any]:
    return {
        "VariantName": name,
        "ModelName": f"model-{name}",
        "InstanceType": "ml.c6i.xlarge",
        "InitialInstanceCount": 1,
        "InitialVariantWeight": weight,
    }


@pytest.fixture
def box(tmp_path: Path) -> tuple[StandInBackend, StandInLauncher, Reconciler, Clock]:
    backend, launcher, clock = StandInBackend(), StandInLauncher(), Clock()

    def fetch(s3: Any, url: str | None, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        return dest

    inline: Callable[[Callable[[], None], str], None] = lambda fn, name: fn()  # noqa: E731
    reconciler = Reconciler(
        lambda: backend,
        launcher,
        s3=None,
        state_dir=tmp_path,
        healthy=healthy,
        fetch=fetch,
        spawn=inline,
        probe=lambda instance: True,
        clock=clock,
        wall=clock,
        time_scale=0.01,
        serverless_idle_s=600.0,  # 6 s at this scale
    )
    return backend, launcher, reconciler, clock


def test_weighted_variants_and_a_shadow_each_run_instances_and_are_routed_apart(box: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, _ = box
    add_config(
        backend,
        "cfg",
        [instance_variant("prod", 2.0)],
        ShadowProductionVariants=[{**instance_variant("candidate", 0.5), "ModelName": "model-candidate"}],
    )
    backend.models["model-candidate"] = StandInModel(
        {"ModelName": "model-candidate", "PrimaryContainer": {"Image": "img:1", "ModelDataUrl": "s3://m/c.tar.gz"}}
    )
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    endpoint = backend.endpoints["ep"]
    assert endpoint.endpoint_status == "InService" and len(launcher.launched) == 2
    route = load_routes(tmp_path / "routes.json")["ep"]
    assert [(v.name, v.weight) for v in route.variants] == [("prod", 2.0)]
    assert [(v.name, v.weight) for v in route.shadows] == [("candidate", 0.25)]  # 0.5 of production's 2.0
    assert route.shadows[0].urls == (launcher.launched[1].url,)
    assert [v["VariantName"] for v in endpoint.production_variants] == ["prod"]
    assert [v["VariantName"] for v in endpoint.shadow_production_variants] == ["candidate"]
    assert [v["shadow"] for v in load_fleet(tmp_path)["ep"]["variants"]] == [False, True]


def test_an_async_config_reaches_the_routes_and_describe_endpoint(box: Any, tmp_path: Path) -> None:
    backend, _, reconciler, _ = box
    add_config(backend, "cfg", [instance_variant("AllTraffic")], AsyncInferenceConfig=ASYNC)
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    expected = {
        "OutputConfig": {
            "S3OutputPath": "s3://results/out",
            "NotificationConfig": {"SuccessTopic": "arn:aws:sns:us-east-1:123456789012:done"},
        }
    }
    assert load_routes(tmp_path / "routes.json")["ep"].async_config == expected
    assert backend.endpoints["ep"].async_inference_config == expected
    assert load_fleet(tmp_path)["ep"]["async"] == expected


def serverless_config(backend: StandInBackend) -> None:
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "model-sl",
        "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 3},
    }
    add_config(backend, "cfg", [variant])


def test_a_serverless_variant_scales_to_zero_when_idle_and_cold_starts_when_a_request_waits(
    box: Any, tmp_path: Path
) -> None:
    backend, launcher, reconciler, clock = box
    serverless_config(backend)
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()  # created warm: the model proves it loads before the endpoint is InService
    endpoint = backend.endpoints["ep"]
    [first] = launcher.launched
    assert endpoint.endpoint_status == "InService"
    [summary] = endpoint.production_variants
    assert summary["CurrentServerlessConfig"] == {"MemorySizeInMB": 2048, "MaxConcurrency": 3}
    assert "CurrentInstanceCount" not in summary
    [route] = load_routes(tmp_path / "routes.json")["ep"].variants
    assert (route.max_concurrency, route.cold, route.urls) == (3, False, (first.url,))

    # A request 4 s in keeps it warm for 6 s more; the gateway reports it in the activity file.
    clock.now += 4.0
    serverless.write_activity(tmp_path, {("ep", "AllTraffic"): serverless.Activity(clock.now)})
    clock.now += 5.9
    reconciler.reconcile_once()
    assert not first.stopped
    clock.now += 0.1
    reconciler.reconcile_once()
    assert first.stopped
    [route] = load_routes(tmp_path / "routes.json")["ep"].variants
    assert (route.cold, route.urls) == (True, ())
    assert load_fleet(tmp_path)["ep"]["variants"][0]["serverless"]["state"] == "cold"
    reconciler.reconcile_once()
    assert len(launcher.launched) == 1  # cold, and nobody waits: nothing starts

    # A request waits: one instance starts, the cold start is recorded, the route is warm again.
    serverless.write_activity(tmp_path, {("ep", "AllTraffic"): serverless.Activity(clock.now, 1, 1)})
    reconciler.reconcile_once()
    assert len(launcher.launched) == 2
    [route] = load_routes(tmp_path / "routes.json")["ep"].variants
    assert (route.cold, route.urls) == (False, (launcher.launched[1].url,))
    state = load_fleet(tmp_path)["ep"]["variants"][0]["serverless"]
    assert (state["state"], state["cold_starts"], state["scaled_to_zero"]) == ("warm", 1, 1)
    assert state["last_cold_start_s"] == 0.0  # the stand-in is healthy at once on the injected clock
    reconciler.reconcile_once()
    assert len(launcher.launched) == 2  # a stale "waiting" in the file does not start a second one


def test_a_serverless_container_gets_its_memory_as_its_limit(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    class Images:
        def pull(self, reference: str) -> None:
            return None

    class Containers:
        def run(self, image: str, **kwargs: Any) -> Any:
            calls.append(kwargs)
            return type("C", (), {"id": "c0ffee"})()

    class Client:
        images, containers = Images(), Containers()

    launcher = ContainerLauncher(Client(), None, lambda ref: "sha256:" + "1" * 64)

    def spec(memory: int | None) -> VariantSpec:
        return VariantSpec(
            "AllTraffic",
            "m",
            "reg/img:1",
            None,
            {},
            "",
            1,
            1.0,
            60,
            serverless=Serverless(memory, 5) if memory else None,
        )

    launcher.launch("ep", spec(3072), 0, tmp_path)
    launcher.launch("ep", spec(None), 0, tmp_path)
    assert (calls[0]["mem_limit"], calls[0]["memswap_limit"]) == ("3072m", "3072m")
    assert "mem_limit" not in calls[1]
    assert container_limits(spec(None)) == {}
