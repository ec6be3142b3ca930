"""Start as root, serve as a service user: SageMaker's root contract without serving requests as root.

AWS, "Custom Inference Code with Hosting Services" (docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-
inference-code.html): "SageMaker AI expects all containers to run with root users ... users that do not have
root-level access can cause permissions issues", and SageMaker untars the model into /opt/ml/model as root. So
the image runs as root and the server verifies and loads the model as root (a root-owned 0700/0600 model
directory loads), then drops to the service user before it answers its first request. Everything the server
needs after the drop is in memory or world-readable (code, venv); its logs go to stdout.
"""

from __future__ import annotations

import logging
import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("sagebox.server")


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    name: str
    home: str


def lookup(user: str) -> Identity | None:
    """The account named `user` (or a numeric uid), or None when this system has no such account."""
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, ValueError):
        return None
    return Identity(entry.pw_uid, entry.pw_gid, entry.pw_name, entry.pw_dir)


def drop_privileges(
    user: str,
    *,
    euid: Callable[[], int] = os.geteuid,
    find: Callable[[str], Identity | None] = lookup,
    become: Callable[[Identity], None] | None = None,
) -> Identity | None:
    """Become `user` if running as root and the account exists; the identity taken, or None if nothing changed.

    Running as another user already (e.g. `docker run --user 10001`) or with `user` empty changes nothing. A
    configured user that does not exist is only logged: the process keeps running as root rather than not at all.
    """
    if not user or euid() != 0:
        return None
    identity = find(user)
    if identity is None:
        log.warning("service user %r does not exist here: serving as root", user)
        return None
    if identity.uid == 0:
        return None
    (become or _become)(identity)
    log.info("model loaded as root; now serving as %s (uid %d)", identity.name, identity.uid)
    return identity


def _become(identity: Identity) -> None:
    # Groups first, uid last: once the uid changes the process may no longer change its groups. glibc applies
    # set*id to every thread of the process (the inference thread and the event loop alike).
    os.setgroups([])
    os.setresgid(identity.gid, identity.gid, identity.gid)
    os.setresuid(identity.uid, identity.uid, identity.uid)
    os.environ["HOME"] = identity.home
    os.environ["USER"] = os.environ["LOGNAME"] = identity.name
