"""The secret detector (core/secret_scan.py): every known shape is found and masked with
its kind, nothing else changes, masking is deterministic, ordinary code, hashes, uuids and
base64 of ordinary content are left alone, and the outbound redaction hook masks the same
findings with its own marker."""

from __future__ import annotations

import pytest

from core.secret_scan import find_secrets, mask_secrets
from providers.redaction import redact_secrets
from tests.conversations.secret_shapes import ORDINARY, SHAPES, shape_text


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_each_known_shape_is_masked_with_its_kind_and_nothing_else_changes(kind):
    around, secret = SHAPES[kind]
    text = around.format(secret)
    masked, findings = mask_secrets(text)
    assert [f.kind for f in findings] == [kind]
    assert secret not in masked
    assert masked == around.format(f"[secret:{kind}]")  # only the secret changed
    assert text[findings[0].start : findings[0].end] == secret


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_code_hashes_uuids_and_base64_content_are_untouched(text):
    assert find_secrets(text) == []
    assert mask_secrets(text)[0] == text


def test_masking_is_deterministic_and_idempotent():
    text = "\n".join(shape_text(kind) for kind in sorted(SHAPES))
    first, findings = mask_secrets(text)
    assert len(findings) == len(SHAPES)
    assert mask_secrets(text)[0] == first
    assert mask_secrets(first) == (first, [])  # the markers are not secrets themselves


def test_a_private_key_cut_short_is_masked_to_the_end_of_its_body_and_a_bare_header_is_not():
    pem = SHAPES["private_key"][1]
    cut = pem[: pem.index("\n-----END")]
    masked, _ = mask_secrets(f"head\n{cut}\n\ntail")
    assert masked == "head\n[secret:private_key]\n\ntail"
    quoted = 'if "-----BEGIN RSA PRIVATE KEY-----" in text: fail()'
    assert find_secrets(quoted) == []


def test_a_secret_inside_json_escaped_text_is_found():
    pem = SHAPES["private_key"][1].replace("\n", "\\n")
    stripe = SHAPES["stripe_key"][1]
    text = f'{{"output": "{pem}", "env": "STRIPE_KEY=\\"{stripe}\\""}}'
    masked, findings = mask_secrets(text)
    assert sorted(f.kind for f in findings) == ["private_key", "stripe_key"]
    assert stripe not in masked and "PRIVATE KEY" not in masked


def test_outbound_redaction_uses_the_same_detector_with_its_own_marker():
    for kind in SHAPES:
        redacted = redact_secrets(shape_text(kind))
        assert redacted == SHAPES[kind][0].format(f"[REDACTED:{kind}]")
