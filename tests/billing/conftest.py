"""Fixtures of the billing tests."""

import pytest


@pytest.fixture
def finance(users):
    """A finance user's browser session, as an API client."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(users["finance"])
    return client
