"""May a given user submit to a CapacityScheduler queue? The queue-ACL check the RM would make
for that user, evaluated by the sidecar because the RM makes it for someone else.

Moving an app (``PUT /apps/{id}/queue``) is authorised against the *caller*: Hadoop's
``ClientRMService.moveApplicationAcrossQueues`` asks ``accessToTargetQueueAllowed(callerUGI, ..)``,
i.e. whether the caller may ``SUBMIT_APPLICATIONS`` to or ``ADMINISTER_QUEUE`` the target queue,
never whether the app's owner may. The sidecar moves observed apps with its own identity, so
before it moves one it has to ask the owner's question itself, or any user could tag an app and
have the sidecar carry it into a queue that user's ACL forbids. This module answers it, from the
values the RM reports, the way Hadoop does:

* ``yarn.acl.enable`` false (the default; ``Configuration.getBoolean``: trimmed, any case, other
  text is the default) means ``QueueACLsManager.checkAccess`` allows everything.
* ``yarn.authorization-provider`` other than ``ConfiguredYarnAuthorizer`` (Ranger, ...) means the
  rules are not in the scheduler configuration: unknown.
* Otherwise ``ConfiguredYarnAuthorizer.checkPermission`` allows a user if the ACL of the queue or
  of any ancestor (walking the path up to ``root``) lets them in, for either
  ``acl_submit_applications`` or ``acl_administer_queue``
  (``yarn.scheduler.capacity.<queue path>.acl_<kind>``). An ACL not set is ``"*"`` on ``root``
  and ``" "`` (nobody) below it (``CapacitySchedulerConfiguration.getAcl``): with ACLs on and
  nothing configured, everybody may submit everywhere.
* ACL strings follow ``AccessControlList(String)``: split once at the first space, users before
  it and groups after it, each a comma-separated list whose items are trimmed (empty ones
  dropped); either part that trims to ``"*"`` allows everyone. ``" "`` allows nobody, and a
  leading space means "groups only".

The sidecar does not know a user's groups. When only a group could let the user in, the answer is
``UNKNOWN`` with a reason naming the groups; callers must treat it as not allowed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ACL_ENABLE_KEY = "yarn.acl.enable"
AUTHORIZATION_PROVIDER_KEY = "yarn.authorization-provider"
# The RM keys a placement check reads with ``rm_conf`` (the provider is usually not defined).
RM_KEYS = (ACL_ENABLE_KEY, AUTHORIZATION_PROVIDER_KEY)
CONFIGURED_AUTHORIZER = "org.apache.hadoop.yarn.security.ConfiguredYarnAuthorizer"
CS_PREFIX = "yarn.scheduler.capacity."
ROOT = "root"
ALL_ACL = "*"
NONE_ACL = " "
# Either queue ACL lets a user move an app into the queue (``accessToTargetQueueAllowed``).
ACL_KINDS = ("acl_submit_applications", "acl_administer_queue")


class Access(enum.StrEnum):
    """The answer: ``UNKNOWN`` only when group membership the sidecar cannot see would decide."""

    ALLOWED = "allowed"
    DENIED = "denied"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the user may submit to the queue, and why, in words fit for a decision record."""

    access: Access
    reason: str

    @property
    def allowed(self) -> bool:
        """Only a definite yes: ``UNKNOWN`` is not allowed."""
        return self.access is Access.ALLOWED


@dataclass(frozen=True, slots=True)
class Acl:
    """One parsed ``AccessControlList``."""

    everyone: bool
    users: frozenset[str]
    groups: frozenset[str]

    def names(self, user: str) -> bool:
        """Whether the ACL lets ``user`` in without looking at groups."""
        return self.everyone or user in self.users


def _java_trim(text: str) -> str:
    """``String.trim``: strips every character up to and including U+0020."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _trimmed_items(text: str) -> frozenset[str]:
    """``StringUtils.getTrimmedStringCollection``: comma-separated, trimmed, no empty items."""
    return frozenset(item for part in text.split(",") if (item := _java_trim(part)))


def parse_acl(text: str) -> Acl:
    """``new AccessControlList(text)``: ``"user1,user2 group1,group2"``, ``"*"``, ``" "``."""
    parts = text.split(" ", 1)  # Java's split(" ", 2): users, then everything after the space
    if any(ALL_ACL in part and _java_trim(part) == ALL_ACL for part in parts):
        return Acl(True, frozenset(), frozenset())
    users = _trimmed_items(parts[0])
    groups = _trimmed_items(parts[1]) if len(parts) == 2 else frozenset[str]()
    return Acl(False, users, groups)


def acls_enabled(value: str | None) -> bool:
    """``conf.getBoolean("yarn.acl.enable", false)``."""
    return value is not None and _java_trim(value).lower() == "true"


def default_authorizer(provider: str | None) -> bool:
    """Whether queue access is the scheduler configuration's ACLs (``ConfiguredYarnAuthorizer``,
    used when ``yarn.authorization-provider`` is not set)."""
    return provider is None or _java_trim(provider) in ("", CONFIGURED_AUTHORIZER)


def needs_scheduler_conf(rm_values: Mapping[str, str]) -> bool:
    """Whether ``submit_access`` will look at the scheduler configuration, given ``RM_KEYS``."""
    return acls_enabled(rm_values.get(ACL_ENABLE_KEY)) and default_authorizer(
        rm_values.get(AUTHORIZATION_PROVIDER_KEY)
    )


def queue_paths(conf: Mapping[str, str]) -> set[str]:
    """Every queue path the configuration defines, walking ``<path>.queues`` down from root
    (``CapacitySchedulerConfiguration.getQueues``: comma-separated, trimmed)."""
    found: set[str] = set()
    todo = [ROOT]
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        children = conf.get(f"{CS_PREFIX}{path}.queues", "")
        todo.extend(f"{path}.{child}" for child in _trimmed_items(children))
    return found


def resolve_queue(conf: Mapping[str, str], queue: str) -> str | None:
    """The full path of ``queue``: itself when it is a path from ``root``, else the one queue
    whose path ends with it (the RM accepts a unique leaf name); None when none or several."""
    if queue == ROOT or queue.startswith(ROOT + "."):
        return queue
    matches = [path for path in queue_paths(conf) if path.endswith("." + queue)]
    return matches[0] if len(matches) == 1 else None


def _chain(path: str) -> list[str]:
    """``root.a.b`` -> ``root.a.b``, ``root.a``, ``root``: the queues whose ACLs are asked."""
    parts = path.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _acl_text(conf: Mapping[str, str], path: str, kind: str) -> str:
    return conf.get(f"{CS_PREFIX}{path}.{kind}", ALL_ACL if path == ROOT else NONE_ACL)


def _join(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def submit_access(
    user: str,
    queue: str,
    *,
    acl_enable: str | None,
    scheduler_conf: Mapping[str, str],
    authorization_provider: str | None = None,
) -> Verdict:
    """May ``user`` submit to (or administer) ``queue``, as the RM would decide for that user?

    ``acl_enable`` is the RM's ``yarn.acl.enable`` value (None: not defined, Hadoop's default
    false); ``scheduler_conf`` the CapacityScheduler properties (the queue ACLs ``GET /scheduler``
    reports, ``mapping.queue_acl_conf``, or ``GET /scheduler-conf``), only read when ACLs are
    enabled; ``authorization_provider`` the RM's
    ``yarn.authorization-provider`` (None: not defined)."""
    if not acls_enabled(acl_enable):
        return Verdict(Access.ALLOWED, f"{ACL_ENABLE_KEY} is false: the RM checks no queue ACL")
    if not default_authorizer(authorization_provider):
        return Verdict(
            Access.UNKNOWN,
            f"queue access is decided by {AUTHORIZATION_PROVIDER_KEY} "
            f"{_java_trim(authorization_provider or '')}, whose rules the sidecar cannot read",
        )
    path = resolve_queue(scheduler_conf, queue)
    if path is None:
        return Verdict(
            Access.UNKNOWN,
            f"queue {queue} does not name exactly one queue of the scheduler configuration, "
            "so its ACLs cannot be read",
        )
    groups: dict[str, set[str]] = {}
    for step in _chain(path):
        for kind in ACL_KINDS:
            text = _acl_text(scheduler_conf, step, kind)
            acl = parse_acl(text)
            if acl.names(user):
                who = "everyone (*)" if acl.everyone else user
                return Verdict(Access.ALLOWED, f"{kind} of {step} allows {who}")
            for group in acl.groups:
                groups.setdefault(group, set()).add(f"{kind} of {step}")
    if groups:
        where = _join({place for places in groups.values() for place in places})
        noun = "group" if len(groups) == 1 else "one of the groups"
        return Verdict(
            Access.UNKNOWN,
            f"only membership of {noun} {_join(groups)} could allow it ({where}), and the "
            "sidecar does not know users' groups",
        )
    return Verdict(
        Access.DENIED,
        f"no acl_submit_applications or acl_administer_queue of {path} or its ancestors "
        f"lists {user} or *",
    )
