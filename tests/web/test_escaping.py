"""Everything an agent, a tool, a grader or a user wrote is shown as text, never run as HTML."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, MetricRow
from tests.web.factories import RunSpec, build_run, failing_case

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def hostile_case_page(client: Client, project: AgentProject) -> str:
    run = build_run(
        project,
        RunSpec(
            texts={
                "response": f"Here you go {SCRIPT} and [a link](javascript:alert(2))",
                "tool_result": SCRIPT,
                "grader_details": {"<img src=x onerror=alert(3)>": [SCRIPT]},
            }
        ),
    )
    case = failing_case(run)
    MetricRow.objects.filter(turn__case=case).update(reasoning=f"because {SCRIPT}")
    case.turns.filter(index=1).update(input=f"Q {SCRIPT}", errors=[f"boom {SCRIPT}"])
    return client.get(reverse("case_detail", args=[run.pk, case.pk])).text


def test_a_script_in_a_response_is_rendered_as_escaped_text(
    viewer_client: Client, project: AgentProject
) -> None:
    html = hostile_case_page(viewer_client, project)
    assert f"Here you go {ESCAPED}" in html
    assert SCRIPT not in html


def test_a_javascript_link_in_markdown_loses_its_href(
    viewer_client: Client, project: AgentProject
) -> None:
    html = hostile_case_page(viewer_client, project)
    assert "a link" in html
    assert "javascript:alert(2)" not in html


def test_scripts_in_tool_results_grader_details_reasoning_and_errors_are_escaped(
    viewer_client: Client, project: AgentProject
) -> None:
    html = hostile_case_page(viewer_client, project)
    assert f'<pre class="json">{ESCAPED}</pre>' in html  # tool result
    assert f'<span class="j-str">{ESCAPED}</span>' in html  # grader details leaf
    assert "&lt;img src=x onerror=alert(3)&gt;" in html  # grader details key
    assert f"because {ESCAPED}" in html  # metric reasoning
    assert f"boom {ESCAPED}" in html  # turn error
    assert f"Q {ESCAPED}" in html  # turn input
    assert "<img" not in html


def test_a_script_in_a_case_name_is_escaped_in_the_case_rows(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1))
    run.cases.filter(index=0).update(name=SCRIPT)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert ESCAPED in html
    assert SCRIPT not in html
