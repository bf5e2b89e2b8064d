"""The OpenAPI contract: /api/v1/schema/ is an OpenAPI 3 document holding every
foundation path (scripts/test validates it once, warnings included), and /api/v1/docs/
(Swagger UI) loads its assets from our own static files, never from a CDN."""

from __future__ import annotations

import re

import pytest

FOUNDATION_OPERATIONS = {
    ("/api/v1/conversations/", "get"): "conversations_list",
    ("/api/v1/conversations/", "post"): "conversations_create",
    ("/api/v1/conversations/{conversation_id}/", "get"): "conversations_retrieve",
    ("/api/v1/conversations/{conversation_id}/messages/", "get"): "messages_list",
    ("/api/v1/conversations/{conversation_id}/messages/", "post"): "messages_append",
    ("/api/v1/conversations/{conversation_id}/context-items/", "get"): "context_items_list",
}


@pytest.fixture
def schema(openapi_schema):
    return openapi_schema


def test_the_generated_schema_is_openapi_3_with_our_title(schema):
    # Its validity against the OpenAPI 3 JSON schema (and the absence of any generator
    # warning): `manage.py spectacular --validate --fail-on-warn`, once, in scripts/test.
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "LCM server API"


def test_every_foundation_operation_is_in_the_schema_with_its_id(schema):
    found = {
        (path, method): operation["operationId"]
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if (path, method) in FOUNDATION_OPERATIONS
    }
    assert found == FOUNDATION_OPERATIONS


def test_operation_ids_are_unique(schema):
    ids = [
        operation["operationId"]
        for methods in schema["paths"].values()
        for operation in methods.values()
        if isinstance(operation, dict) and "operationId" in operation
    ]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_path_is_under_api_v1(schema):
    assert [path for path in schema["paths"] if not path.startswith("/api/v1/")] == []


def test_the_append_operation_documents_both_request_shapes(schema):
    operation = schema["paths"]["/api/v1/conversations/{conversation_id}/messages/"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/MessageAppendRequest"}
    one_of = schema["components"]["schemas"]["MessageAppendRequest"]["oneOf"]
    refs = sorted(item["$ref"].rsplit("/", 1)[1] for item in one_of)
    assert refs == ["MessageBatchInputRequest", "MessageInputRequest"]
    assert set(operation["responses"]) >= {"200", "201"}


def test_the_list_operations_document_cursor_pagination(schema):
    for path in (
        "/api/v1/conversations/{conversation_id}/messages/",
        "/api/v1/conversations/{conversation_id}/context-items/",
    ):
        params = {p["name"] for p in schema["paths"][path]["get"]["parameters"]}
        assert {"cursor", "limit", "conversation_id"} <= params, path


def test_the_list_operations_document_the_page_envelope(schema):
    pages = {
        "/api/v1/conversations/": ("ConversationPage", "Conversation"),
        "/api/v1/conversations/{conversation_id}/messages/": ("MessagePage", "Message"),
        "/api/v1/conversations/{conversation_id}/context-items/": (
            "ContextItemPage",
            "ContextItem",
        ),
    }
    components = schema["components"]["schemas"]
    for path, (page, item) in pages.items():
        ok = schema["paths"][path]["get"]["responses"]["200"]
        assert ok["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{page}"
        }, path
        envelope = components[page]
        assert sorted(envelope["properties"]) == ["next", "previous", "results"]
        assert envelope["properties"]["results"]["items"] == {
            "$ref": f"#/components/schemas/{item}"
        }


def test_errors_are_documented_in_the_one_shape(schema):
    error = schema["components"]["schemas"]["Error"]
    assert sorted(error["properties"]) == ["code", "extra", "message"]
    for (path, method), _ in FOUNDATION_OPERATIONS.items():
        responses = schema["paths"][path][method]["responses"]
        for status in ("400", "401", "404"):
            body = responses[status]["content"]["application/json"]["schema"]
            assert body == {"$ref": "#/components/schemas/Error"}, (path, method, status)


def test_the_schema_is_served_as_json(anon_api, db):
    response = anon_api.get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    served = response.json()
    assert set(FOUNDATION_OPERATIONS) <= {
        (path, method) for path, methods in served["paths"].items() for method in methods
    }


def test_the_schema_is_served_as_yaml_by_default(anon_api, db):
    response = anon_api.get("/api/v1/schema/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    assert b"/api/v1/conversations/{conversation_id}/messages/:" in response.content


_URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


def test_swagger_ui_is_served_without_any_cdn(anon_api, db):
    response = anon_api.get("/api/v1/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page.lower()
    assert re.findall(r"https?://", page) == []
    assets = _URL.findall(page)
    assert assets, page
    assert all(url.startswith("/static/") for url in assets), assets


def test_every_swagger_ui_asset_is_served_from_our_static_files(anon_api, db):
    page = anon_api.get("/api/v1/docs/").content.decode()
    for url in _URL.findall(page):
        asset = anon_api.get(url)
        assert asset.status_code == 200, url
        body = b"".join(asset.streaming_content) if asset.streaming else asset.content
        assert len(body) > 100, url


def _operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def test_every_operation_documents_its_errors_in_the_one_shape(schema):
    error = {"$ref": "#/components/schemas/Error"}
    for path, method, operation in _operations(schema):
        responses = operation["responses"]
        expected = {"401", "429"}
        if "{" in path:
            expected |= {"404"}
        if "requestBody" in operation:
            expected |= {"400", "404", "413", "415"}
        if method in ("post", "delete"):
            expected |= {"403", "409"}
        assert expected <= set(responses), (path, method, sorted(responses))
        for status, response in responses.items():
            if status[0] in "45":
                body = response["content"]["application/json"]["schema"]
                assert body == error, (path, method, status)


def test_every_request_object_refuses_unknown_fields(schema):
    components = schema["components"]["schemas"]
    requests = [name for name in components if name.endswith("Request")]
    assert len(requests) > 20
    for name in requests:
        component = components[name]
        if "properties" in component:  # oneOf wrappers (MessageAppendRequest) hold refs
            assert component["additionalProperties"] is False, name


def test_request_strings_state_that_nul_is_refused(schema):
    title = schema["components"]["schemas"]["ConversationCreateRequest"]["properties"]["title"]
    assert title["pattern"] == "^[^\x00]*$"
    session = schema["components"]["schemas"]["ConversationCreateRequest"]["properties"][
        "session_id"
    ]
    # Not blank either, where "blank" is what DRF trims: Python's whitespace, which is
    # not a regex engine's \\s (\\x1c-\\x1f and \\x85 are whitespace to Python only).
    pattern = re.compile(session["pattern"])
    for char in map(chr, range(0x3001)):
        if char != "\x00":
            assert (pattern.fullmatch(char * 2) is None) == char.isspace(), hex(ord(char))
    assert pattern.fullmatch(" a\x1c") and pattern.fullmatch("\ufeff")


def test_page_limits_are_typed_integers_from_one(schema):
    for path, _method, operation in _operations(schema):
        for param in operation.get("parameters", []):
            if param["name"] == "limit" and param["in"] == "query":
                assert param["schema"]["type"] == "integer", path
                assert param["schema"]["minimum"] == 1, path


def test_a_message_id_and_a_summary_id_are_typed_as_they_are_returned(schema):
    item = schema["components"]["schemas"]["AssembledItem"]["properties"]["id"]
    assert item["oneOf"] == [{"type": "integer"}, {"type": "string"}]


def test_a_turn_stream_is_documented_event_by_event(schema):
    """Clients (and schemathesis) check each parsed Server-Sent Event against the
    text/event-stream schema: an event block's fields, not one string."""
    for path in ("/api/v1/sessions/{session_id}/turns/", "/api/v1/turns/{turn_id}/stream/"):
        operations = schema["paths"][path].values()
        streams = [
            op["responses"]["200"]["content"]["text/event-stream"]["schema"]
            for op in operations
            if "text/event-stream" in op["responses"].get("200", {}).get("content", {})
            and "Server-Sent" in op["responses"]["200"].get("description", "")
        ]
        assert streams, path
        for event in streams:
            assert event["type"] == "object"
            assert event["properties"]["data"]["type"] == "string"
