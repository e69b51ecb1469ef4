"""Wire parsing of RM JSON: documented quirks (docs/yarn.md s.1 item 8, s.2, s.13) and garbage."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from app.yarn import wire
from app.yarn.errors import RMProtocolError
from tests.unit.yarn.samples import CLUSTER_INFO, CLUSTER_METRICS, app_json, node_json


@pytest.mark.parametrize("empty", [{}, None])
def test_empty_apps_both_forms(empty: Any) -> None:
    assert wire.parse(wire.AppsEnvelope, {"apps": empty}).items() == []


def test_single_app_as_object_is_a_list_of_one() -> None:
    envelope = wire.parse(wire.AppsEnvelope, {"apps": {"app": app_json()}})
    assert [a.id for a in envelope.items()] == ["application_1476912658570_0001"]


def test_numbers_and_booleans_as_strings() -> None:
    # Jersey "mapped" notation may quote scalars (docs/yarn.md s.2).
    app = wire.parse(
        wire.AppEnvelope,
        {"app": app_json(allocatedMB="2048", progress="12.5", priority="3", elapsedTime="7")},
    ).app
    assert (app.allocatedMB, app.progress, app.priority, app.elapsedTime) == (2048, 12.5, 3, 7)
    assert wire.parse(wire.ConfVersionWire, {"versionID": "4"}).versionID == 4
    assert wire.parse(wire.ConfVersionWire, {"versionID": 4}).versionID == 4


def test_conf_version_root_wrapped_as_on_3_5_0() -> None:
    # Seen on a live 3.5.0 RM: the Jersey 2 provider keeps the root element.
    body = {"configversion": {"versionID": 7}}
    assert wire.parse(wire.ConfVersionWire, body).versionID == 7


def test_finished_app_negative_allocations_are_kept_on_the_wire() -> None:
    app = wire.parse(wire.AppEnvelope, {"app": app_json(allocatedMB=-1, allocatedVCores=-1)}).app
    assert (app.allocatedMB, app.allocatedVCores) == (-1, -1)


def test_optional_fields_missing_in_older_versions() -> None:
    # 2.x/3.0 AppInfo without launchTime, priority, applicationTags, memorySeconds.
    minimal = {"id": "application_1_0001", "state": "ACCEPTED"}
    app = wire.parse(wire.AppEnvelope, {"app": minimal}).app
    assert (app.launchTime, app.priority, app.applicationTags, app.memorySeconds) == (0, 0, "", 0)


def test_null_strings_become_empty() -> None:
    app = wire.parse(wire.AppEnvelope, {"app": app_json(diagnostics=None)}).app
    assert app.diagnostics == ""


def test_cluster_info_and_metrics_samples() -> None:
    info = wire.parse(wire.ClusterInfoEnvelope, CLUSTER_INFO).clusterInfo
    assert (info.id, info.state, info.haState) == (1476912658570, "STARTED", "ACTIVE")
    metrics = wire.parse(wire.ClusterMetricsEnvelope, CLUSTER_METRICS).clusterMetrics
    assert (metrics.totalMB, metrics.pendingVirtualCores) == (8192, 1)


def test_nodes_single_object_and_labels() -> None:
    body = {"nodes": {"node": node_json(nodeLabels="gpu")}}
    nodes = wire.parse(wire.NodesEnvelope, body).items()
    assert [(n.id, n.nodeLabels) for n in nodes] == [("host1:45454", ["gpu"])]
    assert wire.parse(wire.NodesEnvelope, {"nodes": None}).items() == []


def test_new_application_hyphenated_keys() -> None:
    body = {
        "application-id": "application_1404198295326_0003",
        "maximum-resource-capability": {"memory": 8192, "vCores": 32},
    }
    new = wire.parse(wire.NewApplicationWire, body)
    assert new.application_id == "application_1404198295326_0003"
    assert (new.maximum_resource_capability.memory, new.maximum_resource_capability.vCores) == (
        8192,
        32,
    )


def test_scheduler_conf_single_property_and_missing_value() -> None:
    one = wire.parse(wire.SchedConfWire, {"property": {"name": "a", "value": "1"}})
    assert [(p.name, p.value) for p in one.properties] == [("a", "1")]
    unset = wire.parse(wire.SchedConfWire, {"property": [{"name": "b"}]})
    assert [(p.name, p.value) for p in unset.properties] == [("b", "")]


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (wire.ClusterInfoEnvelope, {"clusterInfo": {"id": "not-a-number"}}),
        (wire.ClusterInfoEnvelope, {"something": "else"}),
        (wire.ClusterMetricsEnvelope, {"clusterMetrics": {"appsSubmitted": 1}}),
        (wire.AppsEnvelope, {"apps": {"app": ["application_1_0001"]}}),
        (wire.AppsEnvelope, ["not", "an", "object"]),
        (wire.AppEnvelope, {"app": app_json(allocatedMB=1.5)}),
        (wire.AppEnvelope, {"app": {"state": "RUNNING"}}),
        (wire.ConfVersionWire, {"versionID": "v1"}),
        (wire.NewApplicationWire, {"application-id": "x"}),
    ],
)
def test_garbage_is_a_protocol_error(model: type[BaseModel], body: Any) -> None:
    with pytest.raises(RMProtocolError):
        wire.parse(model, body)
