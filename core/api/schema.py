"""Schema pieces every app's API shares: the one error shape and cursor page envelopes,
so the OpenAPI document says what clients really receive."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field
from rest_framework import serializers

from core.api.requests import NO_NUL_PATTERN


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. `invalid`.")
    message = serializers.CharField(help_text="What went wrong, for a person.")
    extra = serializers.DictField(help_text="Details such as `field`, `index` or `limit`.")

    class Meta:
        ref_name = "Error"


@extend_schema_field(
    {"oneOf": [{"type": "integer"}, {"type": "string"}]},
)
class ItemIdField(serializers.JSONField):
    """An item of history: a message id (an integer) or a summary/file id (a string)."""


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


ERROR_DESCRIPTIONS = {
    400: "Bad input (a wrong type, an unknown field, a value out of range); nothing was stored.",
    401: "Not authenticated: no or a bad `Authorization: Token <key>`.",
    403: "Authenticated but not allowed (staff only, a used-up grant, a missing CSRF token "
    "for a browser session).",
    404: "No such resource, or not visible to this user (or an invalid page cursor).",
    409: "Conflicts with the current state (another writer holds the conversation: retry "
    "after `Retry-After` seconds; or the request does not fit the object's state).",
    413: "Request body over LCM_MAX_REQUEST_BYTES.",
    415: "The body is not `application/json` (or the documented upload type).",
    429: "Too many requests for this token or client IP: retry after `Retry-After` seconds.",
}
ERRORS = {status: _error(ERROR_DESCRIPTIONS[status]) for status in (400, 401, 404)}
WRITE_ERRORS = {**ERRORS, 413: _error(ERROR_DESCRIPTIONS[413])}

CURSOR_PARAMETERS = [
    OpenApiParameter("cursor", str, description="Opaque cursor from a `next`/`previous` link."),
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1},
        description="Page size from 1, up to 1,000 (larger is clamped); another value is a 400.",
    ),
]


def cursor_page(name: str, item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """A uniquely named page serializer: `{next, previous, results: [item]}`."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": item(many=True),
        },
    )


# ---------------------------------------------------------------------------------------
# The contract hook: what every operation can answer, stated once for all of them.

_UNSAFE = {"post", "put", "patch", "delete"}
_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_JSON_VALUE = "JsonValue"
_JSON_VALUE_REF = f"#/components/schemas/{_JSON_VALUE}"


def _statuses_for(path: str, method: str, operation: dict) -> list[int]:
    """The error statuses an operation can answer, from what it takes."""
    params = operation.get("parameters", [])
    has_body = "requestBody" in operation
    statuses = [401, 429]  # every operation needs a token and is throttled
    if has_body or any(p.get("in") == "query" for p in params):
        statuses.append(400)
    if method in _UNSAFE:
        statuses += [403, 409]  # CSRF for browser sessions; lock contention is a 409
    if "{" in path or has_body or any(p.get("name") == "cursor" for p in params):
        statuses.append(404)
    if has_body:
        statuses += [413, 415]
    return statuses


def _close_request_components(result: dict) -> None:
    """`additionalProperties: false` on every object a request body can hold: request
    serializers refuse unknown fields (core/api/requests.py)."""
    components = result.get("components", {}).get("schemas", {})
    components[_JSON_VALUE] = {
        "description": "Any JSON value. Strings and object keys hold no NUL character, at "
        "any depth (PostgreSQL text and jsonb cannot store it): such a request is a 400 "
        "`malformed_request`.",
        "pattern": NO_NUL_PATTERN,
        "propertyNames": {"pattern": NO_NUL_PATTERN},
        "additionalProperties": {"$ref": _JSON_VALUE_REF},
        "items": {"$ref": _JSON_VALUE_REF},
    }
    closer = _RequestSchemaCloser(components)
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            body = operation.get("requestBody", {}) if isinstance(operation, dict) else {}
            for media in body.get("content", {}).values():
                closer.close(media.get("schema"))
                ref = media.get("schema", {}).get("$ref", "")
                component = components.get(ref.rsplit("/", 1)[-1], {})
                if component.get("required") or "oneOf" in component or "anyOf" in component:
                    body["required"] = True  # an empty body cannot satisfy it


class _RequestSchemaCloser:
    """Closes request schemas in place, following each `$ref` into the components once."""

    def __init__(self, components: dict) -> None:
        self.components = components
        self.seen: set[str] = set()

    def close(self, node) -> None:
        if isinstance(node, list):
            for item in node:
                self.close(item)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if ref:
            name = ref.rsplit("/", 1)[1]
            if name not in self.seen and name in self.components:
                self.seen.add(name)
                self.close(self.components[name])
            return
        if not node:  # any JSON value (a JSONField): the parser's rules, by reference
            node["$ref"] = _JSON_VALUE_REF
            return
        self._close_free_form(node)
        _forbid_nul_in_strings(node)
        if "properties" in node:
            # An object that states its own additionalProperties (a content block that
            # carries provider fields) keeps it; anyOf/oneOf beside properties are rules
            # over the same fields (RequestSerializer.schema_rules), not other objects.
            node.setdefault("additionalProperties", False)
            self.close(list(node["properties"].values()))
            self.close(node.get("items"))
            return
        for key in ("items", "oneOf", "anyOf", "allOf"):
            if key in node:
                self.close(node[key])

    def _close_free_form(self, node: dict) -> None:
        """A free-form object (metadata, a tool's input, provider fields of a block): its
        values are JSON values, and its keys, like every string, hold no NUL
        (core/api/parsers.py refuses it)."""
        extra = node.get("additionalProperties")
        if extra is True or extra == {}:
            node["additionalProperties"] = {"$ref": _JSON_VALUE_REF}
        if extra is not None and extra is not False:
            node.setdefault("propertyNames", {"pattern": NO_NUL_PATTERN})
            if isinstance(extra, dict) and extra:
                self.close(extra)


def _forbid_nul_in_strings(node: dict) -> None:
    """PostgreSQL text cannot hold NUL (core/api/parsers.py refuses it): say so."""
    kind = node.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    if is_string and "format" not in node and "enum" not in node:
        node.setdefault("pattern", NO_NUL_PATTERN)


def contract_hook(result, generator, request, public):
    """drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]):
    documents the error responses each operation can give, in the one error shape, and
    closes request objects to unknown fields."""
    for path, methods in result.get("paths", {}).items():
        for method, operation in methods.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for param in operation.get("parameters", []):
                schema = param.get("schema", {})
                plain = "enum" not in schema and "format" not in schema
                if param.get("in") == "query" and schema.get("type") == "string" and plain:
                    schema.setdefault("pattern", NO_NUL_PATTERN)
            for status in _statuses_for(path, method, operation):
                responses.setdefault(
                    str(status),
                    {
                        "description": ERROR_DESCRIPTIONS[status],
                        "content": {"application/json": {"schema": _ERROR_REF}},
                    },
                )
            for status, response in responses.items():
                # Errors documented without a body (a bare description) get the shape too.
                if status[0] in "45" and "content" not in response:
                    response["content"] = {"application/json": {"schema": _ERROR_REF}}
    _drop_redundant_null_choices(result)
    _close_request_components(result)
    return result


def _drop_redundant_null_choices(node) -> None:
    """A nullable field of any JSON type comes out as `oneOf: [{}, {type: null}]`, which
    in OpenAPI 3.1 (JSON Schema 2020-12) no value satisfies when it is null (`{}` matches
    null too, and oneOf wants exactly one): any value, null included, is `{}`."""
    if isinstance(node, list):
        for item in node:
            _drop_redundant_null_choices(item)
        return
    if not isinstance(node, dict):
        return
    choices = node.get("oneOf")
    if isinstance(choices, list) and {} in choices and {"type": "null"} in choices:
        rest = [c for c in choices if c != {"type": "null"}]
        if rest == [{}]:
            del node["oneOf"]
    for value in node.values():
        _drop_redundant_null_choices(value)
