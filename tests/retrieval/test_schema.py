"""Every retrieval endpoint is in the OpenAPI schema with its operation id."""

from __future__ import annotations

RETRIEVAL_OPERATIONS = {
    ("/api/v1/describe/{item_id}/", "get"): "describe",
    ("/api/v1/grep/", "post"): "grep",
    ("/api/v1/expand/", "post"): "expand",
    ("/api/v1/expansions/", "post"): "expansions_create",
    ("/api/v1/tools/", "get"): "tools_list",
    ("/api/v1/tools/call/", "post"): "tools_call",
}


def test_every_retrieval_operation_is_in_the_schema(openapi_schema):
    schema = openapi_schema
    found = {
        (path, method): operation["operationId"]
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if (path, method) in RETRIEVAL_OPERATIONS
    }
    assert found == RETRIEVAL_OPERATIONS
    grep_body = schema["components"]["schemas"]["GrepQueryRequest"]
    assert grep_body["required"] == ["query"]
