"""``SchedConfUpdate.to_xml``: the ``<sched-conf>`` body of docs/yarn.md s.5.3, parsed back."""

from __future__ import annotations

from xml.etree import ElementTree

from app.yarn.wire import SchedConfUpdate


def _entries(element: ElementTree.Element | None) -> list[tuple[str | None, str | None]]:
    assert element is not None
    return [(e.findtext("key"), e.findtext("value")) for e in element.findall("entry")]


def test_full_update_structure() -> None:
    update = SchedConfUpdate(
        add_queues={"root.a": {"capacity": "10", "maximum-capacity": "10"}},
        update_queues={"root.default": {"capacity": "90", "maximum-capacity": "90"}},
        remove_queues=["root.old"],
        global_updates={"yarn.scheduler.capacity.queue-mappings-override.enable": "true"},
    )
    xml = update.to_xml()
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>')
    root = ElementTree.fromstring(xml)
    assert root.tag == "sched-conf"
    # The RM applies remove -> add -> update -> global whatever the order; we emit that order.
    assert [child.tag for child in root] == [
        "remove-queue",
        "add-queue",
        "update-queue",
        "global-updates",
    ]
    assert root.findtext("remove-queue") == "root.old"
    add = root.find("add-queue")
    assert add is not None
    assert add.findtext("queue-name") == "root.a"
    assert _entries(add.find("params")) == [("capacity", "10"), ("maximum-capacity", "10")]
    upd = root.find("update-queue")
    assert upd is not None
    assert upd.findtext("queue-name") == "root.default"
    assert _entries(upd.find("params")) == [("capacity", "90"), ("maximum-capacity", "90")]
    assert _entries(root.find("global-updates")) == [
        ("yarn.scheduler.capacity.queue-mappings-override.enable", "true")
    ]


def test_special_characters_are_escaped() -> None:
    value = '<a & "b">'
    xml = SchedConfUpdate(update_queues={"root.q": {"acl_submit_applications": value}}).to_xml()
    assert '<a & "b">' not in xml
    params = ElementTree.fromstring(xml).find("update-queue/params")
    assert _entries(params) == [("acl_submit_applications", value)]


def test_empty_value_unsets_and_empty_update_has_no_sections() -> None:
    xml = SchedConfUpdate(update_queues={"root.q": {"maximum-capacity": ""}}).to_xml()
    params = ElementTree.fromstring(xml).find("update-queue/params")
    assert _entries(params) == [("maximum-capacity", "")]
    assert list(ElementTree.fromstring(SchedConfUpdate().to_xml())) == []


def test_several_queues_each_get_an_element() -> None:
    update = SchedConfUpdate(
        update_queues={"root.a": {"capacity": "3w"}, "root.b": {"capacity": "1w"}},
        remove_queues=["root.x", "root.y"],
    )
    root = ElementTree.fromstring(update.to_xml())
    assert [e.findtext("queue-name") for e in root.findall("update-queue")] == ["root.a", "root.b"]
    assert [e.text for e in root.findall("remove-queue")] == ["root.x", "root.y"]
