"""How the box's steps talk to whoever runs them: a `Say` takes one line of progress; a line that starts with
`WARNING` stays on screen (`sagebox up` prints it), where progress lines are replaced by the next."""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]
WARNING = "warning: "
