"""Errors answer in the shape of where they happen: JSON under /api/, pages elsewhere; a
delete that others still refer to is a 409 that says so, never a 500."""

from tests.metering.factories import make_deployment


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
