"""The CLI's start: libraries' noise quieted before any command runs."""

from __future__ import annotations

import logging

import pytest

from sagebox.cli.app import QUIET_LOGGERS, main


def test_libraries_users_never_call_log_only_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in QUIET_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert [logging.getLogger(name).level for name in QUIET_LOGGERS] == [logging.ERROR] * len(QUIET_LOGGERS)
