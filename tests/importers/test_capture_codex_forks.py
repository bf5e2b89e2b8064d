"""A forked Codex rollout begins by replaying its parent's: the parent's messages are stored
once (in the parent's conversation), the fork holds its own and names where it forked."""

from __future__ import annotations

import pytest

from conversations.models import Message, Summary
from importers.models import ImportedConversation, ImportedMessage
from importers.services import import_file
from tests.factories import UserFactory
from tests.importers.agent_sessions import codex_fork, codex_rollout, write_jsonl
from tests.support.concurrent import run_together

PARENT = "019b0000-aaaa-7000-8000-000000000001"
FORK = "019b0000-bbbb-7000-8000-000000000002"
CUT = 16  # the parent's lines up to its compaction: 11 messages, "Now commit." not among them


def _texts(session):
    return [
        m.content for m in Message.objects.filter(conversation__session_id=session).order_by("seq")
    ]


def _row(session):
    return ImportedConversation.objects.get(conversation__session_id=session).metadata


def _write(tmp_path, name, records):
    return write_jsonl(tmp_path / f"rollout-{name}.jsonl", records)


def _fork(parent, fork_id=FORK, cut=CUT, own=("Try another way.",)):
    return codex_fork(parent, fork_id=fork_id, cut=cut, own=list(own))


def test_a_fork_stores_only_what_follows_its_parents_replay(user, tmp_path):
    parent = _write(tmp_path, "parent", codex_rollout())
    fork = _write(tmp_path, "fork", _fork(codex_rollout()))
    import_file(format="codex", path=parent, owner=user)
    report = import_file(format="codex", path=fork, owner=user)
    # Its own header's instructions and its own prompt; the 11 replayed messages are the parent's.
    assert _texts(FORK) == ["Follow AGENTS.md.", "Try another way."]
    assert len(_texts(PARENT)) == 14
    meta = _row(FORK)
    assert meta["line"] == "fork" and meta["parent_session"] == PARENT
    assert meta["replayed_sessions"] == [PARENT]
    assert meta["session_meta"]["forked_from_id"] == PARENT  # the fork's own header
    parent_id = Message.objects.get(external_id=f"codex:{PARENT}:1").conversation_id
    assert (meta["parent_conversation_id"], meta["replayed_messages"]) == (parent_id, 11)
    assert meta["fork_point"] == f"codex:{PARENT}:16"  # the parent's compaction
    assert report.notes["forks"][0]["replayed_messages"] == 11
    # The compaction came with the replay: linked once, in the parent.
    assert Summary.objects.count() == 1 and report.ok
    again = import_file(format="codex", path=fork, owner=user)
    assert again.totals()["messages"] == 0 and _row(FORK)["replayed_messages"] == 11


def test_the_replay_ends_at_the_first_message_that_differs_from_the_parents(user, tmp_path):
    records = _fork(codex_rollout())
    answer = next(r for r in records if "Fixed." in str(r["payload"].get("content")))
    answer["payload"]["content"][0]["text"] = "Fixed, differently."
    import_file(format="codex", path=_write(tmp_path, "parent", codex_rollout()), owner=user)
    import_file(format="codex", path=_write(tmp_path, "fork", records), owner=user)
    texts = _texts(FORK)
    assert texts[1:] == [
        "Fixed, differently.",
        "Fixed.",  # its event repeat: no item says it now
        "The user asked to fix a test; it was fixed with a patch.",
        "Try another way.",
    ]
    assert _row(FORK)["replayed_messages"] == 9


def test_a_fork_imported_before_its_parent_keeps_the_replay_and_loses_nothing(user, tmp_path):
    fork = _write(tmp_path, "fork", _fork(codex_rollout()))
    first = import_file(format="codex", path=fork, owner=user)
    assert first.notes["forks"][0]["parent_imported"] is False
    assert len(_texts(FORK)) == 13  # its header, the 11 replayed, its prompt
    import_file(format="codex", path=_write(tmp_path, "parent", codex_rollout()), owner=user)
    again = import_file(format="codex", path=fork, owner=user)
    assert again.totals()["messages"] == 0 and len(_texts(FORK)) == 13
    assert _row(FORK)["replayed_messages"] == 0  # what it holds is its own now


def test_a_fork_of_a_fork_is_compared_with_everything_its_parent_said(user, tmp_path):
    first = _fork(codex_rollout())
    second = codex_fork(first, fork_id="fork-2", cut=len(first), own=["And another."])
    for name, records in (("parent", codex_rollout()), ("fork", first), ("fork2", second)):
        import_file(format="codex", path=_write(tmp_path, name, records), owner=user)
    assert _texts("fork-2") == ["Follow AGENTS.md.", "And another."]
    # fork-1's header and prompt, and the parent's 11 between them.
    assert _row("fork-2")["replayed_messages"] == 13
    assert _row("fork-2")["fork_point"] == f"codex:{FORK}:18"


def test_a_dry_run_of_a_fork_counts_only_its_own_messages(user, tmp_path):
    import_file(format="codex", path=_write(tmp_path, "parent", codex_rollout()), owner=user)
    fork = _write(tmp_path, "fork", _fork(codex_rollout()))
    dry = import_file(format="codex", path=fork, owner=user, dry_run=True)
    assert dry.totals()["messages"] == 2 and not Message.objects.filter(
        conversation__session_id=FORK
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_imports_of_one_fork_at_once_store_its_messages_once(tmp_path):
    user = UserFactory(username="forker")
    import_file(format="codex", path=_write(tmp_path, "parent", codex_rollout()), owner=user)
    fork = _write(tmp_path, "fork", _fork(codex_rollout(), own=[f"p{n}" for n in range(30)]))
    run_together(lambda: import_file(format="codex", path=fork, owner=user), times=2, timeout=60)
    assert len(_texts(FORK)) == 31
    fork_rows = ImportedMessage.objects.filter(conversation__session_id=FORK)
    assert fork_rows.count() == 31 == len(set(fork_rows.values_list("message_id", flat=True)))
    assert _row(FORK)["replayed_messages"] == 11
