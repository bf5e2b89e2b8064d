"""Issue 43, item 11: a redaction is a background job. The request answers 202 with the
job's URL before any work (the reporter's user-wide `{"literal": "0000"}` did not answer
within 30 s); the same request is the same job; a literal short enough to match
everywhere needs a dry run first; a job whose queue entry was lost is run by the
reconciler; the command shows the same report."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from conversations.inputs import parse_message
from conversations.services import messages_append
from memory.indexing import index_conversation_messages
from memory.models import Chunk
from security.models import Redaction
from security.reconcile import reconcile_security_jobs
from security.redaction import jobs
from security.redaction.request import parse, scope_of_conversation
from security.redaction.verify import verify
from tests.factories import ConversationFactory

KEY = "sk_test_51JobQueueKeyZq8Xw2Vb6Nm4"


def _conversation(owner, settings):
    settings.LCM_SECRET_POLICY = "off"
    conversation = ConversationFactory(owner=owner)
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"use {KEY} and pin Zq7x"})],
    )
    return conversation


def test_a_user_wide_redaction_answers_202_at_once_and_asking_again_is_the_same_job(
    api, user, settings
):
    _conversation(user, settings)
    refused = api.post("/api/v1/redactions/", {"literal": "0000"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (409, "dry_run_required")
    assert "dry_run" in refused.json()["message"] and Redaction.objects.count() == 0

    first = api.post("/api/v1/redactions/", {"literal": KEY}, format="json")
    again = api.post("/api/v1/redactions/", {"literal": KEY}, format="json")

    assert first.status_code == again.status_code == 202
    body = first.json()
    assert (body["state"], body["progress"]["steps_done"], body["plan"]) == ("pending", 0, {})
    assert first["Location"] == body["url"] == f"/api/v1/redactions/{body['id']}/"
    assert again.json()["id"] == body["id"] and Redaction.objects.count() == 1
    row = Redaction.objects.get()
    assert KEY not in row.request_key and len(row.request_key) == 64
    assert verify([KEY]).count > 0  # nothing done yet: the worker does it


def test_the_reconciler_runs_a_job_whose_queue_entry_was_lost_and_the_command_shows_it(
    api, user, settings, capsys
):
    _conversation(user, settings)
    body = api.post("/api/v1/redactions/", {"literal": KEY}, format="json").json()
    Redaction.objects.filter(pk=body["id"]).update(
        created_at=timezone.now() - timedelta(seconds=60)
    )

    assert reconcile_security_jobs()["redactions"] == 1  # queued again (and run: sync)

    shown = api.get(body["url"]).json()
    assert (shown["state"], shown["progress"]["steps_done"]) == (
        "done",
        shown["progress"]["steps_total"],
    )
    assert shown["verification"]["occurrences"] == 0 and verify([KEY]).count == 0
    call_command("lcm_redact", "show", body["id"])
    assert json.loads(capsys.readouterr().out) == shown
    again = api.post("/api/v1/redactions/", {"literal": KEY}, format="json")
    assert again.json()["id"] == body["id"]  # done minutes ago: the same job


def test_the_command_needs_a_dry_run_for_a_short_literal_then_redacts(
    user, settings, monkeypatch, capsys
):
    conversation = _conversation(user, settings)
    args = ["lcm_redact", "redact", "--conversation", str(conversation.pk), "--stdin"]
    monkeypatch.setattr("sys.stdin", io.StringIO("Zq7x\n"))
    with pytest.raises(CommandError, match="dry_run"):
        call_command(*args)
    monkeypatch.setattr("sys.stdin", io.StringIO("Zq7x\n"))
    call_command(*args, "--dry-run")
    dry = json.loads(capsys.readouterr().out)
    assert (dry["state"], dry["plan"]["canonical"]["messages"]) == ("done", 1)
    monkeypatch.setattr("sys.stdin", io.StringIO("Zq7x\n"))
    call_command(*args, "--confirm-dry-run", dry["id"])
    done = json.loads(capsys.readouterr().out)
    assert done["state"] == "done" and done["verification"]["occurrences"] == 0


def test_a_literal_matching_over_a_thousand_messages_plans_and_redacts(api, user, settings):
    """The reporter's kind of request: a short literal in every message (here 1,100 of
    them: the plan once built one SQL condition per message, past SQLite's depth limit)."""
    settings.LCM_SECRET_POLICY = "off"
    conversation = ConversationFactory(owner=user)
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message({"role": "user", "content": f"ticket {n} pin Zq7x"}) for n in range(1100)
        ],
    )
    index_conversation_messages(conversation_id=conversation.pk)
    request = parse({"literal": "Zq7x", "dry_run": True}, scope_of_conversation(conversation))
    dry = jobs.start(request, via="command")
    assert (dry.state, dry.plan["canonical"]["messages"]) == ("done", 1100), dry.error
    assert dry.plan["memory_units"] == Chunk.objects.filter(conversation=conversation).count()
