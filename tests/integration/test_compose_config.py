"""The Docker compose stack uses the same YARN configuration CI tests (``docs/yarn.md`` section 10).

Docker does not run in CI, so this checks the files instead: the compose file parses, mounts
``hadoop-docker/conf/capacity-scheduler.xml`` (which the mini cluster loads) into the RM and NM,
repeats every ``conf/yarn-site.xml`` property with the same value in ``hadoop-docker/config``, and
points the sidecar at the RM service. Needs no RM.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import yaml

HADOOP_DOCKER = Path(__file__).resolve().parents[2] / "hadoop-docker"
COMPOSE = HADOOP_DOCKER / "docker-compose.yaml"
ENV_FILE = HADOOP_DOCKER / "config"
HADOOP_CONF_DIR = "/opt/hadoop/etc/hadoop"


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _xml_properties(path: Path) -> dict[str, str]:
    root = ElementTree.parse(path).getroot()
    return {prop.findtext("name", ""): prop.findtext("value", "") for prop in root.iter("property")}


def _env_file() -> dict[str, str]:
    entries: dict[str, str] = {}
    for line in ENV_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            entries[key] = value
    return entries


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """host path (resolved against hadoop-docker/) -> container path."""
    mounts: dict[str, str] = {}
    for volume in service.get("volumes", []):
        host, container, *_ = str(volume).split(":")
        mounts[str((HADOOP_DOCKER / host).resolve())] = container
    return mounts


def test_services_and_images() -> None:
    services = _compose()["services"]
    assert {"namenode", "datanode", "resourcemanager", "nodemanager", "sidecar"} <= set(services)
    for name in ("namenode", "datanode", "resourcemanager", "nodemanager"):
        assert "apache/hadoop:" in services[name]["image"]
        assert services[name]["env_file"] == ["./config"]
    assert services["resourcemanager"]["command"] == ["yarn", "resourcemanager"]
    assert services["nodemanager"]["command"] == ["yarn", "nodemanager"]


def test_scheduler_conf_is_the_shared_file() -> None:
    services = _compose()["services"]
    shared = HADOOP_DOCKER / "conf" / "capacity-scheduler.xml"
    assert shared.is_file()
    for name in ("resourcemanager", "nodemanager"):
        mounts = _mounts(services[name])
        assert mounts.get(str(shared.resolve())) == f"{HADOOP_CONF_DIR}/capacity-scheduler.xml"
    for host in _mounts(services["resourcemanager"]):
        assert Path(host).exists(), host
    # envtoconf would rewrite the mounted file if the env file carried scheduler keys.
    assert not [key for key in _env_file() if key.startswith("CAPACITY-SCHEDULER.XML_")]
    queues = _xml_properties(shared)["yarn.scheduler.capacity.root.queues"]
    assert queues.split(",") == ["default", "etl", "adhoc", "deadline"]


def test_yarn_site_matches_env_file() -> None:
    shared = _xml_properties(HADOOP_DOCKER / "conf" / "yarn-site.xml")
    env = _env_file()
    assert shared["yarn.scheduler.configuration.store.class"] == "memory"
    for key, value in shared.items():
        assert env.get(f"YARN-SITE.XML_{key}") == value, key


def test_sidecar_points_at_the_rm() -> None:
    sidecar = _compose()["services"]["sidecar"]
    assert sidecar["environment"]["YARN_SIDECAR_RM_URLS"] == "http://resourcemanager:8088"
    dockerfile = HADOOP_DOCKER.parent / sidecar["build"]["dockerfile"]
    assert dockerfile.is_file()
    assert (HADOOP_DOCKER / sidecar["build"]["context"]).resolve() == HADOOP_DOCKER.parent
