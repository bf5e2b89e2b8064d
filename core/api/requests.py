"""The one rule for JSON request bodies: exact JSON types and no unknown fields.

DRF's fields coerce (`"5"` for an integer, `0` for a string, `"yes"` for a boolean) and a
plain serializer drops fields it does not know. Both break the contract the OpenAPI schema
states (and that generated clients rely on), and a misspelt option would silently fall
back to its default. Every request serializer derives from `RequestSerializer`; the schema
says `additionalProperties: false` for each of them (core/api/schema.py).
"""

from __future__ import annotations

import copy
from typing import Any

from django.http import QueryDict
from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers
from rest_framework.fields import empty

# JSON Schema patterns for strings: no NUL (PostgreSQL text cannot hold it), and for a
# field that trims whitespace and refuses blanks, at least one other character.
NO_NUL_PATTERN = "^[^\u0000]*$"
# Spelled out, not `\s`: DRF trims what Python's str.isspace() calls whitespace, which
# differs from a regex engine's \s (Python counts \x1c-\x1f and \x85; ECMA adds \ufeff).
_PY_WHITESPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NON_BLANK_PATTERN = f"^[^\u0000]*[^{_PY_WHITESPACE}\u0000][^\u0000]*$"
# A blank string as the server judges it (str.strip() leaves nothing), for schema rules.
BLANK_PATTERN = f"^[{_PY_WHITESPACE}]*$"

_INT = "an integer"
_NUMBER = "a number"
_STRING = "a string"
_BOOL = "true or false"
_LIST = "a list"
_OBJECT = "an object"


def json_integer(value: Any) -> int | None:
    """`value` as an integer when JSON Schema 2020-12 (the schema is OpenAPI 3.1) calls it
    one: an int, or a number with no fractional part (`175.0`); None otherwise (a bool,
    `1.5`, a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _expected_type(field: serializers.Field) -> tuple[str, tuple[type, ...]] | None:
    """The JSON type a field takes, or None when any JSON value is fine."""
    if isinstance(field, serializers.BooleanField):
        return _BOOL, (bool,)
    if isinstance(field, serializers.IntegerField):
        return _INT, (int,)
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        return _NUMBER, (int, float)
    if isinstance(field, serializers.ChoiceField):
        choices = list(field.choices)
        if choices and all(isinstance(c, str) for c in choices):
            return _STRING, (str,)
        return None
    if isinstance(field, serializers.CharField | serializers.DateTimeField):
        return _STRING, (str,)
    if isinstance(field, serializers.ListField | serializers.ListSerializer):
        return _LIST, (list,)
    if isinstance(field, serializers.DictField | serializers.Serializer):
        return _OBJECT, (dict,)
    return None


def json_type_problem(field: serializers.Field, value: Any, path: str = "") -> str | None:
    """What is wrong when `value` is not of the JSON type `field` takes (`path` names a
    nested item), else None."""
    if value is None:
        return None  # the field's own allow_null decides
    expected = _expected_type(field)
    if expected is not None:
        name, types = expected
        is_bool = isinstance(value, bool)
        if name == _INT and json_integer(value) is not None:
            pass  # 175.0 is an integer to the schema; DRF's IntegerField makes it 175
        elif not isinstance(value, types) or (is_bool and bool not in types):
            return f"{path} must be {name}".strip()
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        for index, item in enumerate(value):
            problem = json_type_problem(field.child, item, f"{path}[{index}]".strip())
            if problem:
                return problem
    if isinstance(field, serializers.DictField) and isinstance(value, dict):
        for key, item in value.items():
            problem = json_type_problem(field.child, item, f"{path}[{key!r}]".strip())
            if problem:
                return problem
    return None


def _form_problem(field: serializers.Field, value: Any) -> str | None:
    # A form boolean is spelt true or false, as generated clients send it (DRF would
    # also take 0, yes, on, ...).
    if isinstance(field, serializers.BooleanField) and value not in ("true", "false"):
        return "must be true or false"
    return None


class RequestSerializer(serializers.Serializer):
    # A JSON request body: unknown fields and wrongly typed values are a 400. (A comment,
    # not a docstring: drf-spectacular would show it as every subclass's description.)
    #
    # `schema_rules`: JSON Schema keywords added to the request component, for rules
    # across fields (`anyOf` of `required` lists) that the fields cannot state.
    schema_rules: dict[str, Any] = {}

    def to_internal_value(self, data):
        if isinstance(data, dict):
            errors = {}
            unknown = sorted(set(data) - set(self.fields))
            for name in unknown:
                errors[name] = ["unknown field"]
            # Form fields (a multipart upload) are all strings: there the fields parse.
            typed = not isinstance(data, QueryDict)
            for name, field in self.fields.items():
                if field.read_only or name not in data:
                    continue
                if not typed:
                    problem = _form_problem(field, data[name])
                else:
                    problem = json_type_problem(field, data[name])
                if problem:
                    errors[name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)

    def run_validation(self, data=empty):
        if data is not empty and data is not None and not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": ["the body must be a JSON object"]}
            )
        return super().run_validation(data)


class RequestSerializerSchema(OpenApiSerializerExtension):
    """Adds a request serializer's `schema_rules` to its component."""

    target_class = RequestSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        if direction == "request":
            schema.update(copy.deepcopy(self.target.schema_rules))
            target = self.target
            fields = (
                target.fields if isinstance(target, serializers.Serializer) else target().fields
            )
            for name, field in fields.items():
                prop = schema.get("properties", {}).get(name)
                if isinstance(field, serializers.ListSerializer) and prop is not None:
                    # drf-spectacular leaves a nested list's bounds out.
                    if field.min_length is not None:
                        prop["minItems"] = field.min_length
                    if field.max_length is not None:
                        prop["maxItems"] = field.max_length
                if isinstance(field, serializers.ListField) and prop:
                    field, prop = field.child, prop.get("items")
                if prop is not None and _refuses_blank(field):
                    prop.setdefault("pattern", NON_BLANK_PATTERN)
        return schema


def _refuses_blank(field: serializers.Field) -> bool:
    # DRF trims whitespace first, so "  " is refused as blank although minLength is 1.
    return (
        isinstance(field, serializers.CharField)
        and not isinstance(field, serializers.RegexField)
        and not field.allow_blank
        and field.trim_whitespace
    )
