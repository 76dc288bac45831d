"""The OpenAPI schema documents the API as it answers: every example validates against the
schema it illustrates, and each operation is filed under its concept's tag."""

from __future__ import annotations

import pytest
from jsonschema import Draft7Validator
from rest_framework.test import APIClient


@pytest.fixture
def schema(users) -> dict:
    client = APIClient()
    client.force_login(users["operator"])
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _json_schema(node, components: dict):
    """An OpenAPI 3.0 schema as JSON Schema: references resolved, `nullable` as null."""
    if isinstance(node, list):
        return [_json_schema(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _json_schema(components[node["$ref"].rsplit("/", 1)[-1]], components)
    converted = {key: _json_schema(value, components) for key, value in node.items()}
    if converted.pop("nullable", False):
        converted = {"anyOf": [converted, {"type": "null"}]}
    return converted


def _examples(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            bodies = [operation.get("requestBody", {})]
            bodies += list(operation.get("responses", {}).values())
            for body in bodies:
                for media, content in (body.get("content") or {}).items():
                    examples = dict(content.get("examples", {}))
                    if "example" in content:
                        examples["example"] = {"value": content["example"]}
                    for name, example in examples.items():
                        yield f"{method} {path} {media} {name}", content["schema"], example


def test_every_example_validates_against_its_own_schema(schema):
    components = schema["components"]["schemas"]
    examples = list(_examples(schema))
    assert len(examples) >= 2  # the usage batch and the capacity samples at least
    for where, body_schema, example in examples:
        validator = Draft7Validator(_json_schema(body_schema, components))
        problems = [error.message for error in validator.iter_errors(example["value"])]
        assert not problems, (where, problems)


def test_otlp_operations_are_tagged_otlp(schema):
    tags = {
        path: {tag for operation in item.values() for tag in operation.get("tags", [])}
        for path, item in schema["paths"].items()
    }
    assert tags["/api/v1/otlp/v1/traces"] == {"OTLP"}
    assert tags["/api/v1/otlp/v1/metrics"] == {"OTLP"}
    assert "OTLP" in [tag["name"] for tag in schema["tags"]]
