"""The control plane's decisions, on a stand-in SageMaker backend and stand-in instances (no processes, no HTTP).

Deployments run inline (`spawn` runs the function at once), health comes from the stand-in instance, so every
assertion follows from the order of calls, never from the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sagebox.box.fleet import InstanceFailed
from sagebox.box.reconciler import Reconciler, load_fleet
from sagebox.box.routes import load_routes
from sagebox.box.specs import VariantSpec


@dataclass
class StandInEndpoint:
    endpoint_name: str
    endpoint_config_name: str
    endpoint_status: str = "Creating"
    failure_reason: str | None = None
    production_variants: list[dict[str, Any]] = field(default_factory=list)
    last_modified_time: Any = None


@dataclass
class StandInModel:
    response_object: dict[str, Any]


class StandInBackend:
    """What the reconciler reads of moto's SageMaker backend."""

    def __init__(self) -> None:
        self.endpoints: dict[str, StandInEndpoint] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.models: dict[str, StandInModel] = {}

    def add(self, config: str, model_data: str | None = "s3://m/model.tar.gz", image: str | None = "img:1") -> None:
        container = {"Image": image, "ModelDataUrl": model_data} if image else {}
        self.models[config] = StandInModel({"ModelName": config, "PrimaryContainer": container})
        variant = {"VariantName": "AllTraffic", "ModelName": config, "InstanceType": "ml.c6i.xlarge"}
        self.configs[config] = {"ProductionVariants": [{**variant, "InitialInstanceCount": 1}]}

    def describe_endpoint_config(self, name: str) -> dict[str, Any]:
        return self.configs[name]

    def describe_model(self, name: str) -> StandInModel:
        return self.models[name]


@dataclass
class StandInInstance:
    url: str
    healthy: bool = True
    running: bool = True
    stopped: bool = False
    answering: bool = True  # what a /ping health check of the serving instance sees
    instance_id: str = "i-0standin"
    output: list[tuple[int, str]] = field(default_factory=list)  # what read_output hands over next

    @property
    def label(self) -> str:
        return self.url

    def read_output(self) -> list[tuple[int, str]]:
        taken, self.output = self.output, []
        return taken

    def alive(self) -> bool:
        return self.running and not self.stopped

    def stop(self) -> None:
        self.stopped = True

    def last_log_lines(self, count: int = 3) -> list[str]:
        return ["model refused: sha256 mismatch"]

    def describe(self) -> dict[str, Any]:
        return {"kind": "stand-in", "url": self.url}


@dataclass
class StandInLauncher:
    mode: str = "processes"
    launched: list[StandInInstance] = field(default_factory=list)
    next_healthy: list[bool] = field(default_factory=list)

    def launch(self, endpoint: str, variant: VariantSpec, index: int, model_dir: Path) -> StandInInstance:
        healthy = self.next_healthy.pop(0) if self.next_healthy else True
        number = len(self.launched)
        instance = StandInInstance(f"http://127.0.0.1:{9000 + number}", healthy, instance_id=f"i-{number:017x}")
        self.launched.append(instance)
        return instance

    def resolve_image(self, image: str) -> str:
        return f"{image}@sha256:{'0' * 64}"


def healthy(instance: Any, timeout_s: float) -> float:
    if not instance.healthy:
        raise InstanceFailed("the container reported a failed model: model refused: sha256 mismatch")
    return 0.0


@pytest.fixture
def parts(tmp_path: Path) -> tuple[StandInBackend, StandInLauncher, Reconciler, list[str]]:
    backend, launcher, settled = StandInBackend(), StandInLauncher(), []
    fetched: list[str] = []

    def fetch(s3: Any, url: str | None, dest: Path) -> Path:
        fetched.append(str(url))
        dest.mkdir(parents=True, exist_ok=True)
        return dest

    inline: Callable[[Callable[[], None], str], None] = lambda fn, name: fn()  # noqa: E731
    clock.now = 0.0
    reconciler = Reconciler(
        lambda: backend,
        launcher,
        s3=None,
        state_dir=tmp_path,
        settle=lambda: settled.append("settled"),
        healthy=healthy,
        fetch=fetch,
        spawn=inline,
        probe=lambda instance: bool(getattr(instance, "answering", True)),
        probe_every_s=5.0,
        unhealthy_after=3,
        clock=clock,
    )
    return backend, launcher, reconciler, fetched


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


clock = Clock()


def routes(tmp_path: Path) -> dict[str, tuple[str, ...]]:
    return {name: route.variants[0].urls for name, route in load_routes(tmp_path / "routes.json").items()}


def test_a_new_endpoint_serves_once_its_instance_is_healthy(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, fetched = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    endpoint = backend.endpoints["ep"]
    assert endpoint.endpoint_status == "InService" and endpoint.failure_reason is None
    assert fetched == ["s3://m/model.tar.gz"]
    assert routes(tmp_path) == {"ep": (launcher.launched[0].url,)}
    [variant] = endpoint.production_variants
    assert variant["CurrentInstanceCount"] == 1
    assert variant["DeployedImages"][0]["ResolvedImage"] == f"img:1@sha256:{'0' * 64}"
    assert load_fleet(tmp_path)["ep"]["config"] == "cfg"
    reconciler.reconcile_once()
    assert len(launcher.launched) == 1  # nothing changes when nothing changed


def test_an_instance_that_fails_its_health_check_fails_the_endpoint(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, _ = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    launcher.next_healthy = [False]
    reconciler.reconcile_once()
    endpoint = backend.endpoints["ep"]
    assert endpoint.endpoint_status == "Failed"
    assert "did not pass the ping health check" in str(endpoint.failure_reason)
    assert "model refused: sha256 mismatch" in str(endpoint.failure_reason)
    assert launcher.launched[0].stopped and routes(tmp_path) == {}


def test_an_update_switches_over_only_when_healthy_and_a_failed_one_keeps_the_old_config(
    parts: Any, tmp_path: Path
) -> None:
    backend, launcher, reconciler, _ = parts
    for config in ("v1", "v2", "v3"):
        backend.add(config, model_data=f"s3://m/{config}.tar.gz")
    backend.endpoints["ep"] = StandInEndpoint("ep", "v1")
    reconciler.reconcile_once()
    first = launcher.launched[0]

    backend.endpoints["ep"].endpoint_config_name, backend.endpoints["ep"].endpoint_status = "v2", "Updating"
    launcher.next_healthy = [False]
    reconciler.reconcile_once()
    endpoint = backend.endpoints["ep"]
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v1")
    assert "did not pass the ping health check" in str(endpoint.failure_reason)
    assert not first.stopped and launcher.launched[1].stopped
    assert routes(tmp_path) == {"ep": (first.url,)}

    endpoint.endpoint_config_name, endpoint.endpoint_status = "v3", "Updating"
    reconciler.reconcile_once()
    third = launcher.launched[2]
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v3")
    assert first.stopped and not third.stopped
    assert routes(tmp_path) == {"ep": (third.url,)}


def test_a_deleted_endpoint_leaves_the_routes_before_its_instances_stop(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, _ = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    del backend.endpoints["ep"]
    reconciler.notify("deleted", "ep")
    assert routes(tmp_path) == {} and launcher.launched[0].stopped


def test_a_dead_instance_is_replaced_from_the_same_model_data(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, fetched = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    launcher.launched[0].running = False
    reconciler.reconcile_once()
    assert len(launcher.launched) == 2 and fetched == ["s3://m/model.tar.gz"]  # not downloaded again
    assert routes(tmp_path) == {"ep": (launcher.launched[1].url,)}
    assert load_fleet(tmp_path)["ep"]["variants"][0]["restarts"] == 1
    assert backend.endpoints["ep"].endpoint_status == "InService"


def test_an_undeployable_spec_fails_the_endpoint_with_the_reason(parts: Any) -> None:
    backend, launcher, reconciler, _ = parts
    backend.add("cfg", image=None)
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    assert backend.endpoints["ep"].endpoint_status == "Failed"
    assert "names no container image" in str(backend.endpoints["ep"].failure_reason)
    assert launcher.launched == []


def test_shutdown_stops_every_instance(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, _ = parts
    for name in ("a", "b"):
        backend.add(name)
        backend.endpoints[name] = StandInEndpoint(name, name)
    reconciler.reconcile_once()
    reconciler.shutdown()
    assert all(i.stopped for i in launcher.launched) and len(launcher.launched) == 2
    assert routes(tmp_path) == {}


def test_shutdown_also_stops_a_deleted_endpoint_still_being_stopped(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, _ = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    later: list[Callable[[], None]] = []
    reconciler._spawn = lambda fn, name: later.append(fn)  # the background stop has not run yet
    del backend.endpoints["ep"]
    reconciler.notify("deleted", "ep")
    assert routes(tmp_path) == {} and not launcher.launched[0].stopped
    reconciler.shutdown()  # the box exits now: it must not leave the deleted endpoint's instances behind
    assert launcher.launched[0].stopped
    for fn in later:
        fn()  # the background stop, run late, finds nothing left to do
    assert reconciler.deleting == []


def test_an_instance_that_stops_answering_its_health_check_is_replaced(parts: Any, tmp_path: Path) -> None:
    backend, launcher, reconciler, _ = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    sick = launcher.launched[0]
    sick.answering = False
    checks = []
    for tick in range(1, 12):  # a pass every second, a health check every 5 s: at 1, 6 and 11
        clock.now = float(tick)
        reconciler.reconcile_once()
        checks.append(len(launcher.launched))
    assert checks[:10] == [1] * 10  # one or two failed checks are not enough, passes between checks count none
    assert checks[10] == 2 and sick.stopped  # the third failed check in a row replaces it
    assert routes(tmp_path) == {"ep": (launcher.launched[1].url,)}
    assert load_fleet(tmp_path)["ep"]["variants"][0]["restarts"] == 1


def test_a_health_check_that_recovers_resets_the_count(parts: Any) -> None:
    backend, launcher, reconciler, _ = parts
    backend.add("cfg")
    backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    reconciler.reconcile_once()
    flaky = launcher.launched[0]
    for tick, answering in ((5.0, False), (7.0, False), (10.0, False), (15.0, True), (20.0, False), (25.0, False)):
        clock.now, flaky.answering = tick, answering
        reconciler.reconcile_once()
    assert not flaky.stopped and len(launcher.launched) == 1
