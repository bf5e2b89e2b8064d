"""`manage.py lcm_demo`: the demo conversation a fresh install opens on."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from conversations.models import ContextItem, Conversation, Message, MessagePart, Summary
from explorer.demo import DEMO_SESSION, demo_load
from explorer.management.commands.lcm_demo import Command as DemoCommand
from largefiles.models import LargeFile
from tests.support.concurrent import run_together


def run_demo(*args) -> str:
    out = io.StringIO()
    call_command("lcm_demo", *args, stdout=out)
    return out.getvalue()


def test_the_demo_loads_a_compacted_coding_session_and_prints_credentials_once(db):
    output = run_demo("--if-empty")
    password = re.search(r"password: (\S+)", output).group(1)
    assert authenticate(username="demo", password=password) is not None
    conversation = Conversation.objects.get(session_id=DEMO_SESSION)
    assert conversation.owner.username == "demo"
    messages = Message.objects.filter(conversation=conversation)
    assert messages.count() == conversation.last_seq == 301
    assert (
        MessagePart.objects.filter(message__conversation=conversation, part_type="tool").count()
        > 100
    )
    assert MessagePart.objects.filter(
        message__conversation=conversation, part_type="reasoning"
    ).exists()
    # several compaction passes: leaves, condensed levels, the active context shrunk
    depths = set(Summary.objects.filter(conversation=conversation).values_list("depth", flat=True))
    assert {0, 1}.issubset(depths)
    assert ContextItem.objects.filter(conversation=conversation).count() < 30
    # the pasted module was stored aside as a large file
    assert LargeFile.objects.filter(conversation=conversation).count() == 1


def test_if_empty_leaves_an_existing_database_alone(db):
    run_demo()
    conversations = Conversation.objects.count()
    output = run_demo("--if-empty")
    assert "already has conversations" in output
    assert "password" not in output
    assert Conversation.objects.count() == conversations


def test_the_demo_command_has_help():
    parser = DemoCommand().create_parser("manage.py", "lcm_demo")
    text = parser.format_help()
    assert "--if-empty" in text
    assert "printed once" in text


def test_a_second_explicit_load_makes_a_second_session_and_a_new_password(db):
    first = re.search(r"password: (\S+)", run_demo()).group(1)
    result = demo_load()
    assert result.created is True
    assert result.conversation.session_id.startswith(f"{DEMO_SESSION}-")
    assert Conversation.objects.filter(owner__username="demo").count() == 2
    assert authenticate(username="demo", password=result.password) is not None
    assert authenticate(username="demo", password=first) is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_racing_if_empty_loads_create_one_demo():
    results = run_together(lambda: demo_load(if_empty=True), times=2)
    assert sorted(r.created for r in results) == [False, True]
    winner = next(r for r in results if r.created)
    assert Conversation.objects.count() == 1
    assert Message.objects.count() == 301
    assert authenticate(username="demo", password=winner.password) is not None
