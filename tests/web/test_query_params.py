"""Every page and API query parameter, given hostile values (integers beyond 64 bits, aware
datetimes at the edges of what Python holds, Unicode digits, NUL, empty, very long): no answer
is a server error, on the configured database, and on SQLite as well (see the last test).

The page parameters are an explicit list checked against the code (every ``*_param(request,
"name")`` and ``request.GET`` read in runs/web and runs/compare/pages), so a new parameter fails
the check until it is listed; the API's are read from the OpenAPI document, so a new one is
covered by itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test import Client

from runs.core.queryvalues import QueryValueError, parse_aware_datetime, parse_int
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_project, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

ROOT = Path(__file__).resolve().parents[2]

# The values a database reads differently (integers past 64 bits, dates past its range) come
# first; the others are refused by the parameters' parsing, before any query.
DATABASE_HOSTILE = 8
HOSTILE = [
    str(2**63),
    str(2**64),
    str(10**30),
    str(-(2**63) - 1),
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "²",
    "٣",
    "①",
    "９",
    "1\x00",
    "",
    "9" * 5000,
]
# The SQLite re-run (test_the_fuzz_and_schemathesis_also_hold_on_sqlite) sends only the values a
# database reads differently: the parsing of the others does not depend on it.
if os.environ.get("HOLODECK_HOSTILE_DATABASE_ONLY"):
    HOSTILE = HOSTILE[:DATABASE_HOSTILE]

# Page -> the query parameters its view reads. {run}/{case} are filled in with real ids.
PAGE_PARAMS: dict[str, list[str]] = {
    "/runs/": [
        "page", "since", "until", "project", "status", "commit", "agent", "version",
        "model", "tag", "min_pass", "q",
    ],
    "/runs/{run}/": [
        "page", "after", "failures", "q", "flaky", "outcome", "metric", "tools", "text", "review",
    ],
    "/runs/{run}/export.json": ["format"],
    "/runs/{run}/progress/": [
        "failures", "q", "flaky", "outcome", "metric", "tools", "text", "review", "since",
        "known", "v",
    ],
    "/compare/?runs={run},{other}": [
        "runs", "kinds", "show", "sort", "baseline", "page", "order", "metric", "min_drop", "q",
    ],
    "/compare/case/?runs={run},{other}&key=case-0": ["runs", "key", "kinds", "order", "q", "turn"],
    "/compare/config/?runs={run},{other}": ["runs", "full"],
    "/compare/export.csv?runs={run},{other}": ["runs", "baseline", "kinds", "metric"],
    "/trends/": [
        "project", "agent", "margin", "last", "regrades", "show", "branch", "kinds",
    ],
    "/runs/{run}/snapshot/agent.yaml": ["download"],
    "/projects/{project}/launch/": ["rerun"],
    "/runs/{run}/replay/": ["cases"],
    "/projects/{project}/review/": ["runs", "mine", "page"],
    "/projects/{project}/calibration/": ["kind", "metric"],
    "/runs/{run}/cases/{case}/turns/": ["v", "whole"],
    "/runs/{run}/cases/{case}/transcript/?turn=0": ["turn", "prefix"],
    "/runs/{run}/cases/{case}/request/?turn=0&call=0": ["turn", "call"],
    "/compare/transcript/?a={case}&b={case}&turn=0": ["a", "b", "turn"],
    "/audit/": ["project", "user", "action", "page"],
}  # fmt: skip

READS = re.compile(r"""_param\(\s*request,\s*"(\w+)"|GET\.(?:get|getlist)\("(\w+)"[,)]""")


@pytest.fixture
def data(db: None) -> dict[str, str]:
    user = make_user("fuzzer", staff=True)
    project = make_project()
    runs = [build_run(project, RunSpec(cases=2, turns=1, failing=(1,))) for _ in range(2)]
    _, secret = token_create(user=user, name="fuzz")
    case = runs[0].cases.order_by("index").first()
    assert case is not None
    return {
        "run": str(runs[0].pk),
        "other": str(runs[1].pk),
        "case": str(case.pk),
        "project": str(project.pk),
        "secret": secret,
    }


def test_the_page_list_names_every_parameter_the_views_read() -> None:
    read: set[str] = set()
    views = [
        *(ROOT / "runs" / "web").glob("*.py"),
        *(ROOT / "runs" / "compare" / "pages").glob("*.py"),
    ]
    for source in views:
        for match in READS.finditer(source.read_text()):
            read.add(match.group(1) or match.group(2))
    read.discard("name")  # params.py's own helpers
    listed = {name for names in PAGE_PARAMS.values() for name in names}
    assert read == listed


def test_no_hostile_page_parameter_is_a_server_error(client: Client, data: dict[str, str]) -> None:
    client.force_login(make_user("viewer"))
    errors = []
    for page, names in PAGE_PARAMS.items():
        path, _, base = page.format(**data).partition("?")
        for name in names:
            for value in HOSTILE:
                query = dict(pair.split("=", 1) for pair in base.split("&") if pair)
                query[name] = value
                response = client.get(path + "?" + urlencode(query))
                if response.status_code >= 500:
                    errors.append((path, name, value[:40], response.status_code))
    assert errors == []


def test_no_hostile_api_parameter_is_a_server_error(data: dict[str, str]) -> None:
    api = Client(headers={"Authorization": f"Bearer {data['secret']}"})
    document = api.get("/api/v1/openapi.json").json()
    ids = {"run_id": data["run"], "case_id": data["case"], "project_id": data["project"]}
    errors, covered = [], 0
    for template, operations in document["paths"].items():
        path = re.sub(r"{(\w+)}", lambda m: ids.get(m.group(1), "1"), template)
        for method, operation in operations.items():
            names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
            for name in names:
                covered += 1
                base = {"runs": [data["run"], data["other"]]} if "runs" in names else {}
                for value in HOSTILE:
                    query = urlencode({**base, name: value}, doseq=True)
                    send = getattr(api, method)
                    response = send(f"{path}?{query}", content_type="application/json")
                    if response.status_code >= 500:
                        errors.append((method, template, name, value[:40], response.status_code))
    assert covered >= 10  # limit, offset, runs, kinds, filters...: the document was read
    assert errors == []


def test_a_page_answers_a_bad_value_with_a_400_that_names_the_parameter(
    viewer_client: Client, data: dict[str, str]
) -> None:
    for query in ("runs=²", "runs=٣", "runs=%s,1" % (2**64), "runs=1%00"):
        response = viewer_client.get(f"/compare/?{query}")
        assert response.status_code == 400, query
        assert '<span class="field-error" id="runs-error">' in response.text
    response = viewer_client.get("/runs/?since=0001-01-01T00:00:00%2B14:00")
    assert response.status_code == 400 and "out of range" in response.text
    assert viewer_client.get("/runs/?until=9999-12-31T23:59:59-14:00").status_code == 400


def test_the_api_answers_a_bad_value_with_a_422_detail(data: dict[str, str]) -> None:
    api = Client(headers={"Authorization": f"Bearer {data['secret']}"})
    for query in (f"limit={2**63}", f"offset={2**63}", "limit=²", "offset=1001%00", "limit=0"):
        response = api.get(f"/api/v1/runs?{query}")
        assert response.status_code == 422, query
        assert isinstance(response.json()["detail"], list)
    assert api.get("/api/v1/runs?limit=1000&offset=10000000").status_code == 200


def test_the_parser_takes_ascii_digits_within_range_only() -> None:
    assert parse_int(" 42 ") == 42
    for raw in ("²", "٣", "①", "９", "1_000", "0x10", str(2**63), "-1", "9" * 5000):
        with pytest.raises(QueryValueError):
            parse_int(raw)
    assert parse_int(str(2**63 - 1)) == 2**63 - 1


def test_the_parser_refuses_datetimes_beyond_what_the_databases_hold() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    east = timezone(timedelta(hours=14))
    west = timezone(timedelta(hours=-14))
    for value in (datetime(1, 1, 1, tzinfo=east), datetime(9999, 12, 31, 23, 59, tzinfo=west)):
        with pytest.raises(QueryValueError):
            parse_aware_datetime(value)
    assert parse_aware_datetime(datetime(2025, 1, 1, 2, tzinfo=east)) == datetime(
        2024, 12, 31, 12, tzinfo=UTC
    )


def test_the_fuzz_and_schemathesis_also_hold_on_sqlite() -> None:
    """CI runs the suite on PostgreSQL; this runs the fuzz tests above and the schemathesis run
    (test_api_fuzz.py, ten generated requests an operation instead of thirty) again in a child
    pytest with DATABASE_URL unset, so on its own SQLite database. On SQLite already, they just
    ran on it: nothing more to do."""
    if connection.vendor == "sqlite":
        return
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.pop("HOLODECK_DATA_DIR", None)  # the child's own data folder (tests/testenv.py)
    env["HOLODECK_FUZZ_EXAMPLES"] = "10"  # every operation again, fewer generated requests
    env["HOLODECK_HOSTILE_DATABASE_ONLY"] = "1"  # the values a database reads differently
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
            "tests/web/test_query_params.py", "tests/web/test_api_fuzz.py",
            "-k", "not also_hold_on_sqlite",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
