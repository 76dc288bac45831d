"""Errors answer in the shape of where they happen: JSON under /api/, pages elsewhere; a
delete that others still refer to is a 409 that says so, never a 500."""

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metering.factories import make_deployment
from tests.servers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_api_path_is_a_json_404(users, token_client):
    response = token_client(users["operator"]).get("/api/v1/no-such-things")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "errors": [{"field": "", "message": "no API operation at /api/v1/no-such-things"}]
    }


def test_an_unknown_page_is_a_page_in_the_shell(users, session_client):
    response = session_client(users["finance"]).get("/no-such-page/")

    assert response.status_code == 404
    text = response.content.decode()
    assert "Page not found" in text and 'aria-label="Main"' in text


def test_a_forbidden_page_is_a_styled_403(users, session_client):
    response = session_client(users["investor"]).get("/billing/ledger/")

    assert response.status_code == 403
    assert "Not allowed" in response.content.decode()


def test_deleting_a_pool_its_deployments_use_is_a_409(db, users, token_client):
    make_deployment(pool="h100-a")
    operator = token_client(users["operator"], scopes=["read", "admin"])

    response = operator.delete("/api/v1/pools/h100-a")

    assert response.status_code == 409
    assert "still referenced by deployments" in response.json()["errors"][0]["message"]
    assert operator.get("/api/v1/pools/h100-a").status_code == 200


def test_the_api_schema_needs_a_sign_in_as_its_docs_do(client, users, token_client):
    assert client.get("/api/schema/").status_code in (401, 403)
    assert client.get("/api/docs/").status_code == 302  # to the sign-in page
    assert token_client(users["tenant"]).get("/api/schema/").status_code == 200


LONG_QUERY = "x=" + "a" * 5000  # a URL over the portal's 4,096 bytes


def test_a_url_over_the_portals_limit_is_a_414_in_the_shape_of_where_it_went(
    users, token_client, session_client
):
    api = token_client(users["operator"]).get(f"/api/v1/tenants?{LONG_QUERY}")
    page = session_client(users["operator"]).get(f"/billing/ledger/?{LONG_QUERY}")

    assert (api.status_code, api["Content-Type"]) == (414, "application/json")
    assert api.json() == {
        "errors": [
            {
                "field": "",
                "message": "the URL is 5018 bytes, longer than the 4096 this portal reads; "
                "narrow the query or send the values in a request body",
            }
        ]
    }
    assert page.status_code == 414 and "This address is too long" in page.content.decode()
    assert token_client(users["operator"]).get("/api/v1/tenants?x=" + "a" * 4000).status_code == 200


def _get(port: int, target: str, headers: dict | None = None) -> tuple[int, str, bytes]:
    """GET `target` as it is; the status, content type and body of the answer."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", target, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


@pytest.fixture
def gunicorn(tmp_path):
    """gunicorn serving the portal from the project's directory, as README runs it (its
    gunicorn.conf.py read from there); no request here reaches the database."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    log = tmp_path / "gunicorn.log"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "portal.wsgi", "--bind",
         f"127.0.0.1:{port}", "--error-logfile", str(log)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for_port(port, process, log)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_the_servers_own_refusals_answer_json_and_the_portal_answers_below_them(gunicorn):
    def get(target: str, headers: dict | None = None) -> tuple[int, str, bytes]:
        return _get(gunicorn, target, headers)

    portal = get(f"/api/v1/tenants?{LONG_QUERY}")  # within gunicorn's line, over the portal's
    line = get("/api/v1/tenants?x=" + "a" * 9000)  # over gunicorn's 8,190
    headers = get("/api/v1/tenants", headers={"X-Big": "b" * 9000})
    page = get(f"/usage/?{LONG_QUERY}")

    assert portal[:2] == (414, "application/json")
    assert "longer than the 4096 this portal reads" in json.loads(portal[2])["errors"][0]["message"]
    for (status, content_type, body), expected in ((line, 414), (headers, 431)):
        assert (status, content_type) == (expected, "application/json"), body[:200]
        [error] = json.loads(body)["errors"]
        assert error["field"] == "" and error["message"]
    assert page[0] == 414 and page[1].startswith("text/html")
