"""Fixtures of the billing tests."""

import pytest


@pytest.fixture
def admin_api(users, token_client):
    """The operator's API client, allowed to ingest usage, read and administer."""
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


@pytest.fixture
def finance(users):
    """A finance user's browser session, as an API client."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(users["finance"])
    return client
