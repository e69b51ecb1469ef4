"""Job templates: the shipped examples load, parameters are typed and quoted, limits hold."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from app.job_templates import TemplateError, load_templates, render

EXAMPLES = Path(__file__).parents[2] / "examples" / "job-templates.yaml"


def test_the_shipped_examples_load() -> None:
    templates = load_templates(EXAMPLES)
    assert set(templates) == {"distributed-shell", "mapreduce-example", "spark-submit"}


def test_rendering_substitutes_validated_values_only() -> None:
    t = load_templates(EXAMPLES)["spark-submit"]
    run = render(
        "spark-submit",
        t,
        {"main_class": "org.example.Nightly", "executors": 4},
        queue="root.deadline",
        memory_mb=None,
        vcores=None,
    )
    assert run["kind"] == "application" and run["template"] == "spark-submit"
    assert "--num-executors 4 --executor-cores 2" in run["command"]
    assert "--class org.example.Nightly hdfs:///" in run["command"]
    assert run["resource"] == {"memory_mb": 2048, "vcores": 1}
    assert run["parameters"]["executors"] == "4"


@pytest.mark.parametrize(
    ("params", "extra", "message"),
    [
        ({"main_class": "org.example.X; rm -rf /"}, {}, "run.parameters.main_class: must match"),
        ({"main_class": "org.example.$(id)"}, {}, "run.parameters.main_class: must match"),
        (
            {"main_class": "org.example.X", "executors": 51},
            {},
            "run.parameters.executors: must be within",
        ),
        (
            {"main_class": "org.example.X", "executors": "4"},
            {},
            "run.parameters.executors: must be an integer",
        ),
        (
            {"main_class": "org.example.X", "command": "sh"},
            {},
            "run.parameters.command: not a parameter",
        ),
        ({}, {}, "run.parameters.main_class: required"),
        (
            {"main_class": "org.example.X"},
            {"queue": "root.etl"},
            "queue: template 'spark-submit' runs in",
        ),
        ({"main_class": "org.example.X"}, {"memory_mb": 9999}, "run.memory_mb: at most 4096"),
    ],
)
def test_bad_parameters_name_the_field(
    params: dict[str, object], extra: dict[str, object], message: str
) -> None:
    t = load_templates(EXAMPLES)["spark-submit"]
    kw: dict[str, object] = {"queue": "root.deadline", "memory_mb": None, "vcores": None, **extra}
    with pytest.raises(TemplateError) as err:
        render("spark-submit", t, params, **kw)  # type: ignore[arg-type]
    assert str(err.value).startswith(message)


def test_values_are_shell_quoted_even_when_the_pattern_allows_more(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        "templates:\n  echo:\n    command: ['echo {word}']\n"
        "    parameters:\n      word: {type: string, pattern: '^.*$'}\n"
    )
    t = load_templates(f)["echo"]
    with pytest.raises(TemplateError, match=r"run\.parameters\.word"):
        render("echo", t, {"word": "a b"}, queue="q", memory_mb=None, vcores=None)
    # ``.*$`` matches "abc\n" (``$`` matches before a trailing newline): the safe characters are
    # matched whole, so the newline is still refused
    with pytest.raises(TemplateError, match=r"run\.parameters\.word"):
        render("echo", t, {"word": "abc\n"}, queue="q", memory_mb=None, vcores=None)
    run = render("echo", t, {"word": "a=b,c"}, queue="q", memory_mb=None, vcores=None)
    assert shlex.split(run["command"]) == ["echo", "a=b,c"]


def test_the_example_input_path_stays_under_its_directory() -> None:
    t = load_templates(EXAMPLES)["mapreduce-example"]
    kw: dict[str, object] = {"queue": "root.deadline", "memory_mb": None, "vcores": None}
    params = {"input": "hdfs:///data/../user/alice", "output": "hdfs:///tmp/out/x"}
    with pytest.raises(TemplateError, match=r"run\.parameters\.input: must match"):
        render("mapreduce-example", t, params, **kw)  # type: ignore[arg-type]
    params["input"] = "hdfs:///data/logs/2026-12-01.txt"
    run = render("mapreduce-example", t, params, **kw)  # type: ignore[arg-type]
    assert "hdfs:///data/logs/2026-12-01.txt hdfs:///tmp/out/x" in run["command"]


def test_a_bad_file_names_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("templates:\n  x:\n    command: ['run {nope}']\n")
    with pytest.raises(
        TemplateError, match=r"t.yaml: templates.x: Value error, command: placeholder \{nope\}"
    ):
        load_templates(f)
    f.write_text("templates:\n  Bad_Name:\n    command: [x]\n")
    with pytest.raises(TemplateError, match=r"templates\.Bad_Name"):
        load_templates(f)
