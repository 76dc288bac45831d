"""Fixtures of the billing tests."""

import pytest


@pytest.fixture
def admin_api(users, token_client):
    """The operator's API client, allowed to ingest usage, read and administer."""
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])
