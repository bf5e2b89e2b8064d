"""Issue 43, item 2: the secret detector against two corpora that grow: every secret shape
known (secret_shapes.CORPUS, URL passwords with RFC 3986's sub-delimiters among them) must
be masked, and none of the ordinary technical messages (ordinary_messages.py, 200 and
more) may be. The figures (shapes masked, false positives) go to docs/benchmarks.md."""

from __future__ import annotations

import pytest

from core.secret_scan import find_secrets, mask_secrets
from tests.conversations.ordinary_messages import MESSAGES
from tests.conversations.secret_shapes import CORPUS


@pytest.mark.parametrize(("kind", "around", "secret"), CORPUS, ids=lambda v: str(v)[:40])
def test_every_shape_of_the_corpus_is_masked(kind, around, secret):
    masked, findings = mask_secrets(around.format(secret))
    assert [f.kind for f in findings] == [kind]
    assert masked == around.format(f"[secret:{kind}]")


def test_the_figures_all_shapes_masked_and_no_ordinary_message_touched():
    unmasked = [
        (kind, around)
        for kind, around, secret in CORPUS
        if secret in mask_secrets(around.format(secret))[0]
    ]
    touched = [(m[:60], find_secrets(m)) for m in MESSAGES if find_secrets(m)]
    assert len(MESSAGES) >= 200
    assert (len(CORPUS) - len(unmasked), len(touched)) == (len(CORPUS), 0), (unmasked, touched)
