"""`manage.py lcm_chat` driven as a real subprocess (lines on stdin) against the live
server: a streamed answer with the header, /pin, /commit, /fork, /context, /history,
/model, /pending, /branches; and its SSE reader on its own."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.terminal.sse import parse_sse
from tests.console.helpers import make_session
from tests.support.tokens import issue_token
from turns.models import Branch, Session, UserTurn

ROOT = Path(__file__).resolve().parents[2]


def run_chat(live_server, user, lines: list[str], *args: str, tmp_path) -> str:
    key = issue_token(user)
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        "LCM_DATA_DIR": str(tmp_path / "client"),
        "LCM_CHAT_TOKEN": key,
        "PYTHONUNBUFFERED": "1",
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "lcm_chat", "--url", live_server.url, *args],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.process(portable=True)
@pytest.mark.django_db(transaction=True)
def test_a_whole_terminal_chat(live_server, user, tmp_path):
    out = run_chat(
        live_server,
        user,
        [
            "hello from the terminal",
            "/pin The launch is on Friday",
            "/pending",
            "/commit",
            "/fork 1",
            "what day is the launch?",
            "/context",
            "/history",
            "/branches",
            "/model",
            "/model nosuch",
            "/quit",
        ],
        "--title",
        "Terminal",
        tmp_path=tmp_path,
    )
    session = Session.objects.get(owner=user)
    main = Branch.objects.get(session=session, parent__isnull=True)
    fork = Branch.objects.get(session=session, parent=main)
    first = UserTurn.objects.get(branch=main, turn_seq=1)
    second = UserTurn.objects.get(branch=fork)
    assert session.title == "Terminal"
    assert session.active_branch_id == fork.pk
    lines = out.splitlines()
    # the header before anything happened
    assert lines[0] == (
        f"[Session: Terminal ({session.pk}) | Branch: main | "
        f"Head: seq 0 {main.base_state_id} | Pending: 0 | Phase: idle]"
    )
    # the streamed answer, then the header with the turn pending
    answer = first.final_assistant_message["rendered_text"]
    assert "assistant:\n" + answer + "\n" in out
    assert "| Pending: 1 | Phase: response_finalized | Stream: " in out
    # /pin, /pending, /commit
    pin = main.head_state.pinned_facts[0]
    assert f"pinned {pin['id']}: The launch is on Friday" in out
    assert "  #1 [response_finalized] hello from the terminal" in out
    assert "committed" in out
    assert f"Head: seq {main.head_seq} {main.head_state_id} | Pending: 0" in out
    # /fork 1 makes the fork active; the next turn goes there
    assert f"forked: branch {fork.label or fork.pk} is now active" in out
    assert f"Branch: {fork.label}" in out
    assert second.user_message["rendered_text"] == "what day is the launch?"
    # /context shows what the model saw, with the pinned fact
    assert "what the model saw for turn #2:" in out
    assert "  pinned: The launch is on Friday" in out
    assert "  user: what day is the launch?" in out
    # /history: the fork sees turn 1 (inherited) and its own turn 2
    assert f"#1 [{first.phase}] offline  {first.pk}" in out
    assert f"#2 [{second.phase}] offline  {second.pk}" in out
    # /branches: the tree, the active one starred
    assert f"   main  {main.pk}" in out
    assert f" *   {fork.label or fork.pk}  {fork.pk} forked after #1" in out
    # /model lists, and refuses an unknown name
    assert " * offline " in out
    assert "unknown model 'nosuch'; configured: offline, " in out


@pytest.mark.process(portable=True)
@pytest.mark.django_db(transaction=True)
def test_it_opens_an_existing_session_and_refuses_a_bad_token(live_server, user, tmp_path):
    session = make_session(user, title="Existing")
    out = run_chat(live_server, user, ["/status"], "--session", session.pk, tmp_path=tmp_path)
    assert out.startswith(f"[Session: Existing ({session.pk}) | Branch: main |")
    bad = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "lcm_chat", "--url", live_server.url],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "LCM_CHAT_TOKEN": "not-a-token", "LCM_DATA_DIR": str(tmp_path / "c2")},
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode != 0
    assert "error: authentication_failed" in bad.stdout or "Invalid token" in bad.stdout
    assert Session.objects.filter(owner=user).count() == 1  # nothing created


def test_the_sse_reader_handles_split_fields_comments_and_multiline_data():
    stream = io.BytesIO(
        b'retry: 1000\n\n: ping\n\nid: 1\nevent: turn\ndata: {"turn_id": "t1"}\n\n'
        b'id: 2\r\nevent: delta\r\ndata: {"text": "a\\nb"}\r\n\r\n'
        b"id: 3\nevent: note\ndata: line one\ndata: line two\n\n"
    )
    events = list(parse_sse(stream))
    assert [(e.id, e.event, e.data) for e in events] == [
        (1, "turn", {"turn_id": "t1"}),
        (2, "delta", {"text": "a\nb"}),
        (3, "note", {"text": "line one\nline two"}),
    ]


@pytest.mark.process(portable=True)
@pytest.mark.django_db(transaction=True)
def test_the_terminal_resumes_after_a_server_crash_and_labels_the_partial_answer(
    user, tmp_path, settings
):
    """`lcm_serve` in a child process, SIGKILLed while the answer streams and started
    again on the same port: the client resumes from its last event id and, once the
    reconciler closed the turn, says the answer is incomplete; the next message works."""
    import threading
    import time

    from tests.turns.live import LiveServer
    from turns.reconcile import reconcile

    server = LiveServer(LCM_OFFLINE_STREAM_DELAY_MS="400", LCM_OFFLINE_STREAM_CHUNKS="12")
    server.start()
    key = issue_token(user)
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        "LCM_DATA_DIR": str(tmp_path / "client"),
        "LCM_CHAT_TOKEN": key,
        "PYTHONUNBUFFERED": "1",
    }
    client = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "lcm_chat", "--url", server.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )
    output: list[str] = []
    reader = threading.Thread(
        target=lambda: output.extend(iter(lambda: client.stdout.read(1), "")), daemon=True
    )
    reader.start()

    def wait_for(text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in "".join(output):
            assert time.monotonic() < deadline, f"no {text!r} in:\n{''.join(output)}"
            time.sleep(0.05)

    try:
        client.stdin.write("this answer will be cut\n")
        client.stdin.flush()
        wait_for("assistant:\n[offline provider] No model")
        server.kill()
        wait_for("(connection dropped; resuming after event ")
        server.start()
        reconcile()  # as a worker's pass would (the test has no worker)
        wait_for("error: stream_interrupted")
        client.stdin.write("and now a whole one\n/quit\n")
        client.stdin.flush()
        assert client.wait(90) == 0
    finally:
        client.kill()
        server.kill()
    reader.join(5)
    out = "".join(output)
    cut, whole = UserTurn.objects.filter(session__owner=user).order_by("turn_seq")
    assert cut.phase == "failed"
    assert "(incomplete: the answer stopped part-way; the partial output above is kept)" in out
    shown = out.split("assistant:\n", 1)[1].split("\n(connection dropped", 1)[0]
    recovered = cut.final_assistant_message["rendered_text"]
    # the journal is durable up to its last flush: one text is a prefix of the other
    assert shown and (recovered.startswith(shown) or shown.startswith(recovered))
    if len(recovered) > len(shown):  # the rest is printed after the resume
        assert recovered[len(shown) :] + "\n(incomplete:" in out
    assert whole.phase != "failed"
    assert whole.final_assistant_message["rendered_text"] in out
