"""Typed models of the ResourceManager's REST JSON exactly as received (``docs/yarn.md`` sections
3-5).

Attribute names are the RM's JSON keys verbatim (``allocatedVCores``, ``haState``...) so a field can
be grepped from a recorded response to here. The models are tolerant where Hadoop versions and the
Jersey 1 / Jersey 2 JSON providers differ (``docs/yarn.md`` section 1 item 8 and section 13):

* ``{"apps":{}}`` and ``{"apps":null}`` are both an empty list;
* a one-element list may arrive as a bare object (Jersey "mapped" notation);
* numbers and booleans may arrive as strings (pydantic's lax mode converts ``"42"``);
* a number that is not finite (Jackson writes a ratio over zero as ``"NaN"`` or ``"Infinity"``)
  is no usable value: the field is read as absent, so it takes its neutral default, and a
  required one is a protocol error;
* fields added in 3.3/3.4/3.5 are optional with a neutral default; unknown fields are ignored.

They are strict about everything else: a missing required field or a value of the wrong kind is an
``RMProtocolError`` via :func:`parse`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, get_args
from xml.etree import ElementTree

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from app.domain.model import Resources
from app.yarn.errors import RMProtocolError

_M = TypeVar("_M", bound=BaseModel)


def _as_list(value: Any) -> Any:
    """Jersey quirks: ``null``/``{}``/``""`` mean empty; one element may come without its list."""
    if value is None or value == {} or value == "":
        return []
    if isinstance(value, list):
        return value
    return [value]


def _null_to_default_str(value: Any) -> Any:
    """Some DAOs render an unset string as ``null``; treat it as empty text."""
    return "" if value is None else value


_Str = Annotated[str, BeforeValidator(_null_to_default_str)]


def _non_finite(value: Any) -> bool:
    """``value`` would parse as a NaN or an infinity (as a number or as text)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, str):
        try:
            return not math.isfinite(float(value))
        except ValueError:
            return False
    return False


_float_fields: dict[type[BaseModel], frozenset[str]] = {}


class _Wire(BaseModel):
    """Base for every RM DAO: ignore fields we do not use, never mutate what was received."""

    # A non-finite number that ``_drop_non_finite`` does not recognise is refused, never kept.
    model_config = ConfigDict(
        extra="ignore", frozen=True, populate_by_name=True, allow_inf_nan=False
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_non_finite(cls, data: Any) -> Any:
        """Drop the float fields whose value is not finite, so they read as absent: one queue's
        ratio over zero must not refuse the whole scheduler answer (and blind every poll), nor
        reach the history, where SQLite cannot keep a NaN and PostgreSQL would chart it."""
        if not isinstance(data, dict):
            return data
        names = _float_fields.get(cls)
        if names is None:
            names = _float_fields[cls] = frozenset(
                name
                for name, info in cls.model_fields.items()
                if info.annotation is float or float in get_args(info.annotation)
            )
        if any(name in data and _non_finite(data[name]) for name in names):
            return {k: v for k, v in data.items() if not (k in names and _non_finite(v))}
        return data


def parse(model: type[_M], data: Any) -> _M:
    """Validate decoded JSON against ``model``; shape errors become ``RMProtocolError``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise RMProtocolError(
            f"unexpected {model.__name__} JSON at {where}: {first['msg']}"
        ) from exc


# --- shared -----------------------------------------------------------------------------------


class ResourceInfo(_Wire):
    """``ResourceInfo``: ``{"memory": MB, "vCores": n, "resourceInformations": {...}}``."""

    memory: int = 0
    vCores: int = 0


class RemoteExceptionBody(_Wire):
    """``GenericExceptionHandler`` error body (``docs/yarn.md`` section 2)."""

    exception: _Str = ""
    message: _Str = ""
    javaClassName: _Str = ""


class RemoteExceptionEnvelope(_Wire):
    """``{"RemoteException": {...}}``."""

    RemoteException: RemoteExceptionBody


# --- /info, /metrics --------------------------------------------------------------------------


class ClusterInfoWire(_Wire):
    """``clusterInfo`` (section 3.1)."""

    id: int
    startedOn: int
    state: str
    haState: str
    resourceManagerVersion: _Str = ""
    hadoopVersion: _Str = ""
    rmStateStoreName: _Str = ""
    haZooKeeperConnectionState: _Str = ""


class ClusterInfoEnvelope(_Wire):
    """``GET /ws/v1/cluster/info``."""

    clusterInfo: ClusterInfoWire


class ClusterMetricsWire(_Wire):
    """``clusterMetrics`` (section 3.2); the fields every 3.x release documents are required."""

    appsSubmitted: int
    appsCompleted: int
    appsPending: int
    appsRunning: int
    appsFailed: int = 0
    appsKilled: int = 0
    totalMB: int
    allocatedMB: int
    availableMB: int
    reservedMB: int = 0
    pendingMB: int = 0
    totalVirtualCores: int
    allocatedVirtualCores: int
    availableVirtualCores: int
    reservedVirtualCores: int = 0
    pendingVirtualCores: int = 0
    containersAllocated: int
    containersReserved: int = 0
    containersPending: int = 0
    totalNodes: int
    activeNodes: int
    lostNodes: int = 0
    unhealthyNodes: int = 0
    decommissioningNodes: int = 0
    decommissionedNodes: int = 0
    rebootedNodes: int = 0
    shutdownNodes: int = 0


class ClusterMetricsEnvelope(_Wire):
    """``GET /ws/v1/cluster/metrics``."""

    clusterMetrics: ClusterMetricsWire


# --- /scheduler (CapacityScheduler) -----------------------------------------------------------


class PartitionUsage(_Wire):
    """One entry of ``resources.resourceUsagesByPartition`` (default partition is ``""``)."""

    partitionName: _Str = ""
    used: ResourceInfo = ResourceInfo()
    reserved: ResourceInfo = ResourceInfo()
    pending: ResourceInfo = ResourceInfo()
    amUsed: ResourceInfo = ResourceInfo()
    amLimit: ResourceInfo = ResourceInfo()


class QueueResources(_Wire):
    """``resources``: per-partition usage."""

    resourceUsagesByPartition: Annotated[list[PartitionUsage], BeforeValidator(_as_list)] = []


class QueueList(_Wire):
    """``queues``: ``{"queue": [...]}``."""

    queue: Annotated[list[QueueWire], BeforeValidator(_as_list)] = []


class QueueAclWire(_Wire):
    """One ``queueAcls.queueAcl`` entry: an ACL type and its ``AccessControlList`` string."""

    accessType: _Str = ""
    accessControlList: _Str = ""


class QueueAclsWire(_Wire):
    """``queueAcls``: the queue's effective ACLs, whichever store configured them."""

    queueAcl: Annotated[list[QueueAclWire], BeforeValidator(_as_list)] = []


class QueueWire(_Wire):
    """A CapacityScheduler queue: root (``CapacitySchedulerInfo``), parent or leaf (section 3.3).

    Root lacks the ``absolute*`` fields and most counters; leaves add the ``num*Applications``.
    """

    type: _Str = ""
    queueName: str
    queuePath: _Str = ""
    queueType: _Str = ""
    state: _Str = ""
    capacity: float = 0.0
    usedCapacity: float = 0.0
    maxCapacity: float = 0.0
    absoluteCapacity: float | None = None
    absoluteMaxCapacity: float | None = None
    absoluteUsedCapacity: float | None = None
    weight: float = -1.0
    mode: _Str = ""
    numApplications: int = 0
    numActiveApplications: int | None = None
    numPendingApplications: int | None = None
    pendingContainers: int = 0
    allocatedContainers: int = 0
    resourcesUsed: ResourceInfo | None = None
    resources: QueueResources | None = None
    queues: QueueList | None = None
    queueAcls: QueueAclsWire | None = None

    def children(self) -> list[QueueWire]:
        """Child queues, empty for a leaf."""
        return self.queues.queue if self.queues is not None else []


QueueList.model_rebuild()
QueueWire.model_rebuild()


class SchedulerInfoWire(QueueWire):
    """``schedulerInfo``: the scheduler type plus, for the CapacityScheduler, the root queue.

    Only the CapacityScheduler is mapped; other schedulers parse with an empty root.
    """

    queueName: str = ""


class SchedulerWrapper(_Wire):
    """``scheduler``."""

    schedulerInfo: SchedulerInfoWire


class SchedulerEnvelope(_Wire):
    """``GET /ws/v1/cluster/scheduler``."""

    scheduler: SchedulerWrapper


# --- /apps ------------------------------------------------------------------------------------


class AppInfoWire(_Wire):
    """``AppInfo`` (section 3.4). Finished apps report ``-1`` allocations; kept as received."""

    id: str
    user: _Str = ""
    name: _Str = ""
    queue: _Str = ""
    state: str
    finalStatus: _Str = ""
    progress: float = 0.0
    applicationType: _Str = ""
    applicationTags: _Str = ""
    priority: int = 0
    startedTime: int = 0
    launchTime: int = 0
    finishedTime: int = 0
    elapsedTime: int = 0
    allocatedMB: int = 0
    allocatedVCores: int = 0
    runningContainers: int = 0
    memorySeconds: int = 0
    vcoreSeconds: int = 0
    diagnostics: _Str = ""
    # The app's default node-label expression (its partition); "" or absent: the default one.
    appNodeLabelExpression: _Str = ""


class AppList(_Wire):
    """``apps``: ``{"app": [...]}``."""

    app: Annotated[list[AppInfoWire], BeforeValidator(_as_list)] = []


class AppsEnvelope(_Wire):
    """``GET /ws/v1/cluster/apps``: ``apps`` may be ``{}`` (3.x) or ``null`` (2.x) when empty."""

    apps: AppList | None

    def items(self) -> list[AppInfoWire]:
        """The apps, empty for both empty forms."""
        return self.apps.app if self.apps is not None else []


class AppEnvelope(_Wire):
    """``GET /ws/v1/cluster/apps/{id}``."""

    app: AppInfoWire


class AppAttemptWire(_Wire):
    """``AppAttemptInfo`` (section 3.6)."""

    id: int = 0
    appAttemptId: str
    containerId: _Str = ""
    appAttemptState: _Str = ""


class AppAttemptList(_Wire):
    """``appAttempts``: ``{"appAttempt": [...]}``."""

    appAttempt: Annotated[list[AppAttemptWire], BeforeValidator(_as_list)] = []


class AppAttemptsEnvelope(_Wire):
    """``GET /apps/{id}/appattempts``."""

    appAttempts: AppAttemptList | None = None


class ContainerWire(_Wire):
    """``ContainerInfo`` of ``GET /apps/{id}/appattempts/{attempt}/containers`` (section 3.6)."""

    containerId: str
    elapsedTime: int = 0
    containerState: _Str = ""


class ContainersEnvelope(_Wire):
    """``{"container": [...]}``; the RM lists the attempt's live containers only."""

    container: Annotated[list[ContainerWire], BeforeValidator(_as_list)] = []


class AppStateWire(_Wire):
    """``AppState``: ``{"state": "ACCEPTED"}`` from ``GET/PUT /apps/{id}/state``."""

    state: str


# --- /nodes -----------------------------------------------------------------------------------


class NodeInfoWire(_Wire):
    """``NodeInfo`` (section 3.7)."""

    id: str
    nodeHostName: _Str = ""
    rack: _Str = ""
    state: str
    nodeLabels: Annotated[list[str], BeforeValidator(_as_list)] = []
    healthReport: _Str = ""
    numContainers: int = 0
    usedMemoryMB: int = 0
    availMemoryMB: int = 0
    usedVirtualCores: int = 0
    availableVirtualCores: int = 0
    totalResource: ResourceInfo | None = None


class NodeList(_Wire):
    """``nodes``: ``{"node": [...]}``."""

    node: Annotated[list[NodeInfoWire], BeforeValidator(_as_list)] = []


class NodesEnvelope(_Wire):
    """``GET /ws/v1/cluster/nodes``."""

    nodes: NodeList | None

    def items(self) -> list[NodeInfoWire]:
        """The nodes, empty for both empty forms."""
        return self.nodes.node if self.nodes is not None else []


# --- writes -----------------------------------------------------------------------------------


class NewApplicationWire(_Wire):
    """``POST /apps/new-application`` (section 4.1), root-unwrapped, hyphenated keys."""

    application_id: str = Field(alias="application-id")
    maximum_resource_capability: ResourceInfo = Field(alias="maximum-resource-capability")


@dataclass(frozen=True, slots=True)
class NewApplication:
    """A fresh application id and the largest container the RM will grant."""

    app_id: str
    max_resources: Resources


# --- scheduler-conf ---------------------------------------------------------------------------


class ConfProperty(_Wire):
    """One ``<property>`` of ``GET /scheduler-conf``; an empty value may be omitted or ``null``."""

    name: str
    value: _Str = ""


class SchedConfWire(_Wire):
    """``GET /scheduler-conf``: ``{"property": [{"name", "value"}, ...]}`` (section 5.2)."""

    properties: Annotated[list[ConfProperty], BeforeValidator(_as_list)] = Field(
        default=[], alias="property"
    )


class ConfServletProperty(_Wire):
    """One property of the RM's ``/conf?name=..`` servlet (JSON)."""

    key: str
    value: str


class ConfServletWire(_Wire):
    """``GET /conf?name=..`` with ``Accept: application/json``: ``{"property": {key, value}}``."""

    property: ConfServletProperty


class ConfVersionWire(_Wire):
    """``GET /scheduler-conf/version``; ``versionID`` may be a string (section 5.2).

    Jersey 1 (<= 3.4) sends ``{"versionID": N}``; the real 3.5.0 RM wraps it in the root element:
    ``{"configversion": {"versionID": N}}``. Both are accepted.
    """

    versionID: int

    @model_validator(mode="before")
    @classmethod
    def _unwrap_root(cls, data: Any) -> Any:
        if isinstance(data, dict) and set(data) == {"configversion"}:
            return data["configversion"]
        return data


@dataclass(frozen=True, slots=True)
class SchedConfUpdate:
    """A ``<sched-conf>`` mutation (section 5.3). The RM applies remove, add, update, global.

    Queue keys are full paths (``root.a``); queue params are relative keys (``capacity``);
    ``global_updates`` keys are full property names. An empty value unsets a key.
    """

    update_queues: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    add_queues: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    remove_queues: Sequence[str] = ()
    global_updates: Mapping[str, str] = field(default_factory=dict)

    def to_xml(self) -> str:
        """The XML body for ``PUT /scheduler-conf`` and ``POST /scheduler-conf/validate``."""
        root = ElementTree.Element("sched-conf")
        for queue in self.remove_queues:
            ElementTree.SubElement(root, "remove-queue").text = queue
        for queue, params in self.add_queues.items():
            _queue_element(root, "add-queue", queue, params)
        for queue, params in self.update_queues.items():
            _queue_element(root, "update-queue", queue, params)
        if self.global_updates:
            _entries(ElementTree.SubElement(root, "global-updates"), self.global_updates)
        body = ElementTree.tostring(root, encoding="unicode")
        return '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' + body


def _queue_element(
    root: ElementTree.Element, tag: str, queue: str, params: Mapping[str, str]
) -> None:
    element = ElementTree.SubElement(root, tag)
    ElementTree.SubElement(element, "queue-name").text = queue
    _entries(ElementTree.SubElement(element, "params"), params)


def _entries(parent: ElementTree.Element, values: Mapping[str, str]) -> None:
    """JAXB map encoding: ``<entry><key/><value/></entry>``."""
    for key, value in values.items():
        entry = ElementTree.SubElement(parent, "entry")
        ElementTree.SubElement(entry, "key").text = key
        ElementTree.SubElement(entry, "value").text = value
