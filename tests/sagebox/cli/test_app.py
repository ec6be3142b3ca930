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


def test_a_warning_said_during_sagebox_up_stays_on_screen(capsys: pytest.CaptureFixture[str]) -> None:
    from sagebox.box.say import WARNING
    from sagebox.cli.box import _steps

    with _steps() as step, step("building the demo's models") as say:
        say("training [1/3]")
        say(f"{WARNING}the demo LLM's INT8 is not deployed on this CPU [refused]")
        say("packaging")
    printed = capsys.readouterr().out
    assert f"{WARNING}the demo LLM's INT8 is not deployed on this CPU [refused]" in printed  # brackets kept as text
