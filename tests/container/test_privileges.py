"""Start as root, serve as the service user: who the server becomes, and when it stays who it is."""

from __future__ import annotations

import pytest

from container.env import EnvError, ServerSettings
from container.privileges import Identity, drop_privileges, lookup

SERVICE = Identity(10001, 10001, "sagebox", "/home/sagebox")


def test_root_becomes_the_service_user() -> None:
    became: list[Identity] = []
    taken = drop_privileges("sagebox", euid=lambda: 0, find=lambda name: SERVICE, become=became.append)
    assert taken == SERVICE and became == [SERVICE]


@pytest.mark.parametrize(
    ("user", "euid", "found"),
    [
        ("sagebox", 10001, SERVICE),  # already unprivileged (docker run --user 10001)
        ("", 0, SERVICE),  # SAGEBOX_SERVICE_USER empty: keep running as started
        ("sagebox", 0, None),  # no such account on this system (e.g. the box's processes)
        ("root", 0, Identity(0, 0, "root", "/root")),  # configured to stay root
    ],
)
def test_nothing_changes_otherwise(user: str, euid: int, found: Identity | None) -> None:
    became: list[Identity] = []
    assert drop_privileges(user, euid=lambda: euid, find=lambda name: found, become=became.append) is None
    assert became == []


def test_accounts_are_found_by_name_or_uid() -> None:
    root = lookup("root")
    assert root is not None and root.uid == 0 and lookup("0") == root
    assert lookup("no-such-account-here") is None


def test_the_service_user_and_bind_host_are_typed_settings() -> None:
    settings = ServerSettings.from_env({})
    assert (settings.service_user, settings.bind_host) == ("sagebox", "0.0.0.0")
    custom = ServerSettings.from_env({"SAGEBOX_SERVICE_USER": "", "SAGEBOX_BIND_HOST": "127.0.0.1"})
    assert (custom.service_user, custom.bind_host) == ("", "127.0.0.1")
    with pytest.raises(EnvError, match="SAGEBOX_BIND_HOST must be an IP address"):
        ServerSettings.from_env({"SAGEBOX_BIND_HOST": "localhost"})
    with pytest.raises(EnvError, match="SAGEBOX_SERVICE_USER must be an account name"):
        ServerSettings.from_env({"SAGEBOX_SERVICE_USER": "a b"})
