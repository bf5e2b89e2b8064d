"""`manage.py lcm_demo`: the demo conversation a fresh install opens on."""

from __future__ import annotations

import io
import re

from django.contrib.auth import authenticate
from django.core.management import call_command

from conversations.models import (
    ContextItem,
    Conversation,
    LargeFile,
    Message,
    MessagePart,
    Summary,
)
from explorer.demo import DEMO_SESSION
from explorer.management.commands.lcm_demo import Command as DemoCommand


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
