"""The chat console in a real headless Chromium against the live server: a streamed turn
with the header following it, a dropped connection resumed without gaps or duplicates,
fork and branch switch, pins, manual retrieval, "what the model saw", and XSS payloads.

The offline provider answers, slowed down (LCM_OFFLINE_STREAM_DELAY_MS) so the stream can
be watched. Turn jobs get no worker here: answered turns stay pending until "commit pending
now", which is how the pending count and the head seq are seen to change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.console.helpers import XSS_TEXT, add_tool_step, client_for, make_session, send
from turns.models import Branch, Session, UserTurn

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def shot(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / f"console-{name}.png"


def sign_in(page, user, live_server) -> None:
    client = client_for(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


@pytest.fixture
def slow_offline(settings):
    settings.LCM_OFFLINE_STREAM_CHUNKS = 8
    settings.LCM_OFFLINE_STREAM_DELAY_MS = 250
    return settings


def watch_header(page) -> None:
    """Record every value the header's phase shows (a MutationObserver, from the test)."""
    page.evaluate(
        """() => {
          window.__phases = [document.getElementById('h-phase').textContent];
          new MutationObserver(records => {
            for (const record of records) {
              for (const node of record.addedNodes) {
                const now = node.textContent;
                if (window.__phases[window.__phases.length - 1] !== now) window.__phases.push(now);
              }
            }
          }).observe(document.getElementById('h-phase'), {childList: true, characterData: true, subtree: true});
        }"""
    )


def wait_for_deltas(page, count: int) -> str:
    """Wait (checking every frame) until the streaming turn applied `count` deltas; its
    text at that moment."""
    return page.wait_for_function(
        """n => {
          const a = document.querySelector('article.turn.streaming');
          return a && Number(a.dataset.deltas || 0) >= n ? a.querySelector('.answer').textContent : null;
        }""",
        arg=count,
        polling="raf",
    ).json_value()


def answer_of(turn_id: str) -> str:
    return UserTurn.objects.get(pk=turn_id).final_assistant_message["rendered_text"]


def test_a_turn_streams_with_the_header_following_it(page, user, live_server, slow_offline):
    session = make_session(user, title="Streaming")
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    expect(page.locator("#model")).to_have_attribute("data-loaded", "true")
    expect(page.locator("#h-pending")).to_have_text("0")
    expect(page.locator("#h-head-seq")).to_have_text("0")
    watch_header(page)

    page.fill("#message", "Tell me about streaming")
    page.keyboard.press("Control+Enter")
    lengths = [len(wait_for_deltas(page, n)) for n in (1, 3, 5)]
    assert 0 < lengths[0] < lengths[1] < lengths[2]
    expect(page.locator("#h-stream")).to_be_visible()
    # the journal fsyncs every 2 s: meanwhile the header says the shown text is buffered
    page.wait_for_function("() => !document.getElementById('h-buffered').hidden", polling="raf")
    page.screenshot(path=str(shot("streaming")))
    # the finished turn replaces the streamed one, server-rendered
    done = page.locator("#transcript article.turn:not(.streaming)")
    expect(done).to_have_count(1)
    turn = UserTurn.objects.get(session=session)
    expect(done.locator(".answer")).to_have_text(answer_of(turn.pk))
    streamed = page.evaluate("window.lcmConsole.lastStream")
    assert streamed["text"] == answer_of(turn.pk)
    assert streamed["resumes"] == 0
    phases = page.evaluate("window.__phases")
    assert phases[:4] == ["idle", "accepted", "context_prepared", "responding"]
    assert phases[-1] == "response_finalized"
    size = len(answer_of(turn.pk).encode())
    expect(page.locator("#h-displayed")).to_have_text(str(size))
    expect(page.locator("#h-durable")).to_have_text(str(size))
    expect(page.locator("#h-buffered")).to_be_hidden()
    # answered, not yet summarized: pending 1 at head 0; "commit pending now" moves the head
    expect(page.locator("#h-pending")).to_have_text("1")
    expect(page.locator("#h-head-seq")).to_have_text("0")
    page.keyboard.press("Escape")  # leave the message box: shortcuts work outside fields
    page.keyboard.press("Shift+C")
    expect(page.locator("#h-pending")).to_have_text("0")
    expect(page.locator("#h-head-seq")).to_have_text("1")
    assert page.console_errors == []


def test_a_dropped_connection_resumes_without_gaps_or_duplicates(
    page, user, live_server, slow_offline
):
    session = make_session(user, title="Resume")
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    expect(page.locator("#model")).to_have_attribute("data-loaded", "true")
    page.fill("#message", "a long answer please")
    page.click("#send")
    streaming = page.locator("article.turn.streaming")
    wait_for_deltas(page, 2)
    assert page.evaluate("window.lcmConsole.dropStream()") is True
    expect(streaming).to_have_attribute("data-resumes", "1")
    done = page.locator("#transcript article.turn:not(.streaming)")
    expect(done).to_have_count(1, timeout=15_000)
    turn = UserTurn.objects.get(session=session)
    streamed = page.evaluate("window.lcmConsole.lastStream")
    assert streamed["resumes"] == 1
    assert streamed["text"] == answer_of(turn.pk)  # no gap, no duplicate
    assert streamed["applied"] == list(range(1, len(streamed["applied"]) + 1))
    assert page.console_errors == [] or all("aborted" in e.lower() for e in page.console_errors)


def test_fork_from_an_earlier_turn_continue_and_switch_back(page, user, live_server):
    session = make_session(user, title="Forks")
    first = send(session, "first on main", commit=True)
    second = send(session, "second on main", commit=True)
    main = session.active_branch_id
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    expect(page.locator("#transcript article.turn")).to_have_count(2)

    page.click(f"[data-fork='{first.pk}']")
    # the page reloads on the same URL with the fork active
    expect(page.locator("#h-branch")).not_to_have_attribute("data-branch", main)
    fork = Branch.objects.get(session=session, parent_id=main)
    expect(page.locator("#h-branch")).to_have_attribute("data-branch", fork.pk)
    expect(page.locator("#transcript article.turn")).to_have_count(1)
    expect(page.locator(f"#transcript [data-turn='{first.pk}']")).to_be_visible()

    page.fill("#message", "continuing on the fork")
    page.click("#send")
    expect(page.locator("#transcript article.turn:not(.streaming)")).to_have_count(2)
    on_fork = UserTurn.objects.get(branch=fork)
    expect(page.locator(f"#transcript [data-turn='{on_fork.pk}']")).to_be_visible()
    expect(page.locator(f"#transcript [data-turn='{second.pk}']")).to_have_count(0)

    page.keyboard.press("Escape")
    page.keyboard.press("b")
    tree = page.locator("#branch-tree li.branch")
    expect(tree).to_have_count(2)
    expect(page.locator("#branch-tree li.branch.active")).to_have_attribute("data-branch", fork.pk)
    page.screenshot(path=str(shot("branches")))
    page.click(f"[data-activate='{main}']")
    expect(page.locator("#h-branch")).to_have_attribute("data-branch", main)
    turns = page.locator("#transcript article.turn")
    expect(turns).to_have_count(2)
    expect(page.locator(f"#transcript [data-turn='{on_fork.pk}']")).to_have_count(0)
    assert Session.objects.get(pk=session.pk).active_branch_id == main
    assert page.console_errors == []


def test_a_pinned_fact_is_in_what_the_model_saw_and_stays(page, user, live_server):
    session = make_session(user, title="Pins")
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    page.keyboard.press("p")
    page.fill("#pin-form input[name=text]", "The release codename is Bluefin")
    page.click("#pin-form button")
    pin = page.locator("#pins li[data-pin]")
    expect(pin).to_have_count(1)
    expect(pin.locator(".pin-text")).to_have_text("The release codename is Bluefin")
    expect(page.locator("#h-head-seq")).to_have_text("1")  # a pin is a new head state

    page.fill("#message", "What is the codename?")
    page.click("#send")
    done = page.locator("#transcript article.turn:not(.streaming)")
    expect(done).to_have_count(1)
    for i in range(4):  # many turns later (run without the browser)
        send(session, f"filler turn {i}", commit=True)
    latest = UserTurn.objects.filter(session=session).order_by("-turn_seq").first()
    page.goto(f"/chat/{session.pk}/turns/{latest.pk}/context/")
    expect(page.locator(".ctx-pins li")).to_have_text(["The release codename is Bluefin"])
    pinned = page.locator("#token-bar .tok[data-section=pinned]")
    expect(pinned).to_have_attribute(
        "data-tokens", str(latest.context["sections_tokens"]["pinned"])
    )
    assert pinned.bounding_box()["width"] > 0
    page.screenshot(path=str(shot("what-the-model-saw")), full_page=True)

    page.goto(f"/chat/{session.pk}/")
    page.keyboard.press("p")
    page.click("#pins [data-unpin]")
    expect(page.locator("#pins li[data-pin]")).to_have_count(0)
    assert page.console_errors == []


def test_xss_payloads_never_run(page, user, live_server):
    session = make_session(user, title=XSS_TEXT)
    sign_in(page, user, live_server)
    page.goto("/chat/")
    page.goto(f"/chat/{session.pk}/")
    page.fill("#message", XSS_TEXT)
    page.click("#send")
    expect(page.locator("#transcript article.turn:not(.streaming)")).to_have_count(1)
    page.keyboard.press("Escape")
    page.keyboard.press("p")
    page.fill("#pin-form input[name=text]", XSS_TEXT)
    page.click("#pin-form button")
    expect(page.locator("#pins li[data-pin]")).to_have_count(1)
    turn = UserTurn.objects.get(session=session)
    add_tool_step(turn, name=XSS_TEXT, arguments={"q": XSS_TEXT}, output=XSS_TEXT)
    page.keyboard.press("Escape")
    page.keyboard.press("h")
    expect(page.locator(".history-turn")).to_have_count(1)
    page.locator(".history-turn > details > summary").click()
    page.locator(".history-turn details.tool-call summary").click()
    expect(page.locator(".history-turn .tool-output")).to_have_text(XSS_TEXT)
    page.goto(f"/chat/{session.pk}/turns/{turn.pk}/context/")
    page.goto(f"/chat/{session.pk}/")
    assert page.evaluate("window.__xss") is None
    assert page.dialogs == []
    assert page.locator("img[src=x]").count() == 0
    expect(page.locator("#transcript .msg.user .text").first).to_have_text(XSS_TEXT)


def test_the_help_overlay_lists_the_shortcuts(page, user, live_server):
    session = make_session(user)
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    page.keyboard.press("?")
    expect(page.locator("#help")).to_be_visible()
    expect(page.locator("#help kbd", has_text="Shift")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.locator("#help")).to_be_hidden()
    page.keyboard.press("i")
    expect(page.locator("#no-pending")).to_be_visible()
    page.keyboard.press("m")
    assert page.evaluate("document.activeElement.id") == "model"


def test_a_turn_cut_by_a_server_crash_shows_its_partial_output_labelled_incomplete(
    page, user, settings
):
    """The real thing: `lcm_serve` in a child process is SIGKILLed mid-stream and started
    again on the same port; the page resumes, the reconciler closes the turn, and the page
    shows what had streamed, labelled incomplete. The next turn works."""
    from tests.turns.live import LiveServer
    from turns.reconcile import reconcile

    session = make_session(user, title="Crash")
    server = LiveServer(
        LCM_OFFLINE_STREAM_DELAY_MS="400",
        LCM_OFFLINE_STREAM_CHUNKS="12",
        LCM_SECRET_KEY=settings.SECRET_KEY,  # so the child accepts this test's sign-in
    )
    server.start()
    try:
        sign_in(page, user, server)
        page.goto(server.url + f"/chat/{session.pk}/")
        expect(page.locator("#model")).to_have_attribute("data-loaded", "true")
        page.fill("#message", "this answer will be cut")
        page.click("#send")
        shown = wait_for_deltas(page, 3)
        server.kill()
        page.wait_for_function(
            "() => Number(document.querySelector('article.turn.streaming').dataset.resumes || 0) >= 1"
        )
        server.start()
        # The reconciler closes the cut turn: the server's start-up hook or a worker's
        # periodic pass (this test has no worker, so it runs one pass itself; a second
        # pass is a no-op).
        reconcile()
        recovered = page.locator("#transcript article.turn.incomplete")
        expect(recovered).to_have_count(1, timeout=60_000)
        expect(recovered.locator(".incomplete-label")).to_have_text("incomplete")
        turn = UserTurn.objects.get(session=session)
        assert turn.phase == "failed"
        partial = recovered.locator(".answer").text_content()
        assert partial.startswith(shown)  # at least what was on screen before the crash
        assert partial == turn.final_assistant_message["rendered_text"]
        page.screenshot(path=str(shot("recovered-incomplete")), full_page=True)

        page.fill("#message", "and now a whole one")
        page.click("#send")
        expect(page.locator("#transcript article.turn:not(.streaming)")).to_have_count(
            2, timeout=30_000
        )
        second = UserTurn.objects.filter(session=session).order_by("-turn_seq").first()
        assert second.phase != "failed"
        expect(page.locator(f"[data-turn='{second.pk}'] .answer")).to_have_text(
            answer_of(second.pk)
        )
    finally:
        server.kill()


def test_manual_retrieval_attaches_a_chunk_that_the_next_context_shows_as_untrusted(
    page, user, live_server, sync_jobs
):
    session = make_session(user, title="Memory")
    send(session, "Our office plant is a kumquat tree named Reginald.", commit=True)
    send(session, "The parking garage closes at nine.", commit=True)
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    page.keyboard.press("r")
    page.fill("#retrieve-form input[name=query]", "kumquat Reginald")
    page.click("#retrieve-form button")
    hits = page.locator("#retrieve-results li.chunk")
    expect(hits.first).to_be_visible()
    expect(hits.first.locator(".chunk-text")).to_contain_text("kumquat")
    expect(hits.first.locator(".score")).to_contain_text("sim ")
    chunk_id = hits.first.get_attribute("data-chunk")
    page.screenshot(path=str(shot("retrieval")))
    hits.first.locator("button[data-attach]").click()
    expect(page.locator("#attached li[data-chunk]")).to_have_count(1)

    page.fill("#message", "what was that plant called?")
    page.click("#send")
    expect(page.locator("#transcript article.turn:not(.streaming)")).to_have_count(3)
    expect(page.locator("#attached")).to_be_hidden()
    turn = UserTurn.objects.filter(session=session).order_by("-turn_seq").first()
    assert turn.attached_chunks == [chunk_id]
    page.goto(f"/chat/{session.pk}/turns/{turn.pk}/context/")
    attached = page.locator(f".ctx-retrieved[data-chunk='{chunk_id}']")
    expect(attached).to_have_count(1)
    expect(attached.locator(".chip").first).to_have_text("untrusted memory")
    expect(attached).to_contain_text("kumquat")
    expect(page.locator(f"#candidates tr[data-chunk='{chunk_id}']")).to_have_count(1)

    page.goto(f"/chat/{session.pk}/")
    page.keyboard.press("c")
    page.fill("#chunk-search input[name=q]", "parking")
    page.click("#chunk-search button")
    expect(page.locator("#chunk-results li.chunk").first).to_contain_text("parking")
    assert page.console_errors == []


def test_rollback_to_an_earlier_turn_makes_a_new_active_branch(page, user, live_server):
    session = make_session(user, title="Rollback")
    first = send(session, "keep this", commit=True)
    second = send(session, "undo this", commit=True)
    main = session.active_branch_id
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    page.click(f"[data-turn='{first.pk}'] [data-rollback]")
    expect(page.locator("#h-branch")).not_to_have_attribute("data-branch", main)
    child = Branch.objects.get(session=session, parent_id=main)
    expect(page.locator("#h-head-seq")).to_have_text(str(child.head_state.state_seq))
    expect(page.locator("#transcript article.turn")).to_have_count(1)
    expect(page.locator(f"#transcript [data-turn='{first.pk}']")).to_be_visible()
    assert UserTurn.objects.filter(pk=second.pk).exists()  # nothing deleted
    assert Session.objects.get(pk=session.pk).active_branch_id == child.pk
    assert page.console_errors == []


def test_a_page_opened_mid_turn_follows_the_running_turn(page, user, live_server, slow_offline):
    from turns import runner
    from turns.services import turn_accept

    session = make_session(user, title="Late")
    sign_in(page, user, live_server)
    turn = turn_accept(session=session, branch=session.active_branch, content="started elsewhere")
    runner.start_turn(turn_id=turn.pk)  # as if another tab had sent it
    page.goto(f"/chat/{session.pk}/")
    streaming = page.locator("article.turn.streaming")
    expect(streaming).to_have_attribute("data-turn", turn.pk)
    expect(streaming.locator(".msg.user .text")).to_have_text("started elsewhere")
    done = page.locator(f"#transcript article.turn:not(.streaming)[data-turn='{turn.pk}']")
    expect(done).to_have_count(1, timeout=15_000)
    expect(done.locator(".answer")).to_have_text(answer_of(turn.pk))
    assert page.evaluate("window.lcmConsole.lastStream.text") == answer_of(turn.pk)
    assert page.console_errors == []


def test_what_the_model_saw_marks_the_stable_prefix_and_the_cache_reads(
    page, user, live_server, settings, monkeypatch
):
    from tests.support.fake_messages_api import FakeMessagesAPI, anthropic_text_stream

    settings.LCM_LIBRARIAN_MODEL = "offline"
    prompt = "You answer about the billing service. " + " ".join(
        f"Rule {i}: cite the file and the ticket." for i in range(150)
    )
    session = make_session(user, title="Cache", context_strategy="lcm", system_prompt=prompt)
    with FakeMessagesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        for i in range(3):
            api.enqueue(anthropic_text_stream(f"Answer {i}: see billing/invoices.py."))
            latest = send(session, f"Question {i} about invoices", model="sonnet")
        reports = api.cache_reports
    assert reports[-1]["cache_read_input_tokens"] > 0
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/turns/{latest.pk}/context/")
    stable = page.locator("#stable-prefix")
    # The current message is in the stable prefix: its breakpoint is the last (issue 46).
    expect(stable).to_have_attribute("data-stable-messages", "5")
    expect(stable.locator(".ctx-history")).to_have_count(4)
    expect(stable.locator(".ctx-history .who")).to_have_text(
        ["user", "assistant", "user", "assistant"]
    )
    expect(page.locator(".ctx-state")).to_have_count(0)  # an lcm session sends no state
    sections = latest.context["sections_tokens"]
    stable_tokens = sum(
        sections.get(k, 0)
        for k in ("tools", "system", "pinned", "state", "summaries", "history", "pending")
    )
    expect(page.locator("#stable-tokens")).to_have_text(str(stable_tokens))
    expect(page.locator("#token-bar .tok[data-section=history]")).to_have_attribute(
        "data-stable", "true"
    )
    expect(page.locator("#token-bar .tok[data-section=user]")).to_have_attribute(
        "data-stable", "false"
    )
    row = page.locator("#usage tr[data-step='0']")
    expect(row.locator(".cache-read")).to_have_text(str(reports[-1]["cache_read_input_tokens"]))
    expect(row.locator(".cache-write")).to_have_text(
        str(reports[-1]["cache_creation_input_tokens"])
    )
    page.screenshot(path=str(shot("what-the-model-saw-cache")), full_page=True)
    assert page.console_errors == []
