"""The explorer in a real headless Chromium against the live server.

Each test gets a fresh browser context (cookies, storage) from one browser per session.
On failure a full-page screenshot is saved under test-artifacts/.
"""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.storage import storages
from django.db.models import Min
from playwright.sync_api import expect

from compaction.engine import compact_conversation
from compaction.models import CompactionJob
from compaction.services import job_run
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import ContextItem, Message, Summary, SummaryMessage
from conversations.services import messages_append
from explorer.selectors import CONTEXT_PAGE, TIMELINE_PAGE
from largefiles.models import LargeFile
from retrieval.selectors import covering_summaries
from tests.explorer.helpers import XSS_TEXT, client_for, compact, xss_payload
from tests.factories import ConversationFactory, append_messages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def sign_in(page, user, live_server) -> None:
    """Reuse a server-side session (the sign-in form itself is tested once, below)."""
    client = client_for(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


def no_xss_ran(page) -> None:
    assert page.evaluate("window.__xss") is None
    assert page.dialogs == []
    assert page.locator("img[src=x]").count() == 0
    assert page.locator("a[href^='javascript:']").count() == 0


def test_sign_in_then_list_and_search_conversations(page, user, other_user):
    mine = ConversationFactory(owner=user, session_id="deploy-review", title="Deploy review")
    ConversationFactory(owner=user, session_id="lunch", title="Lunch")
    ConversationFactory(owner=other_user, session_id="deploy-secret", title="Not yours")
    append_messages(mine, 4)

    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.fill("#id_username", "owner")
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/$"))
    rows = page.locator("#conversations tbody tr")
    expect(rows).to_have_count(2)

    page.fill("#q", "deploy")
    page.click("form.search button")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("deploy-review")
    expect(rows.first.locator("td.num").first).to_have_text("4")
    assert page.console_errors == []


def test_conversation_page_shows_the_context_bar_and_loads_more_items(page, user, live_server):
    conversation = ConversationFactory(owner=user, session_id="long")
    append_messages(conversation, CONTEXT_PAGE + 30)
    tokens = sum(
        Message.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )
    sign_in(page, user, live_server)

    page.goto("/")
    page.click("text=long")
    expect(page.locator("#context-bar")).to_be_visible()
    expect(page.locator("#context-bar [data-seg=total]")).to_have_text(str(tokens))
    expect(page.locator("#context-bar rect.seg-tail")).to_have_count(1)
    expect(page.locator("#context-bar rect.seg-older")).to_have_count(1)
    expect(page.locator("#timeline article.message")).to_have_count(TIMELINE_PAGE)

    items = page.locator("#context-items li.ctx")
    expect(items).to_have_count(CONTEXT_PAGE)
    page.click("button.load-more")
    expect(items).to_have_count(CONTEXT_PAGE + 30)
    expect(page.locator("button.load-more")).to_have_count(0)
    assert page.console_errors == []


def click_node(page, summary_id: str) -> None:
    """A real mouse click on the node where cytoscape drew it."""
    # (return nothing: Playwright would try to serialize the whole cytoscape instance)
    page.evaluate(f"void window.lcmCy.center(window.lcmCy.getElementById('{summary_id}'))")
    box = page.locator("#dag").bounding_box()
    point = page.evaluate(
        f"(() => window.lcmCy.getElementById('{summary_id}').renderedPosition())()"
    )
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])


def test_the_dag_draws_every_summary_and_a_clicked_node_expands(
    page, user, live_server, small_chunks
):
    conversation = ConversationFactory(owner=user, session_id="dag")
    append_messages(conversation, 120)
    compact(conversation)
    summaries = Summary.objects.filter(conversation=conversation)
    condensed = summaries.filter(kind="condensed").order_by("-depth").first()
    sign_in(page, user, live_server)

    page.goto(f"/conversations/{conversation.pk}/")
    page.click("#tab-dag")
    page.wait_for_selector("body[data-dag-ready=true]")
    assert page.evaluate("window.lcmCy.nodes().length") == summaries.count()
    assert page.evaluate("window.lcmCy.edges().length") > 0
    # dagre placed sources below what is built on them
    source = condensed.parent_links.order_by("ordinal").first().parent_summary_id
    y = page.evaluate(
        f"[window.lcmCy.getElementById('{condensed.pk}').position('y'),"
        f" window.lcmCy.getElementById('{source}').position('y')]"
    )
    assert y[0] < y[1]
    # history reads left to right: the oldest leaf is left of the newest
    leaves = (
        summaries.filter(kind="leaf")
        .annotate(first_seq=Min("message_links__message__seq"))
        .order_by("first_seq")
    )
    oldest, newest = leaves.first().pk, leaves.last().pk
    x = page.evaluate(
        f"[window.lcmCy.getElementById('{oldest}').position('x'),"
        f" window.lcmCy.getElementById('{newest}').position('x')]"
    )
    assert x[0] < x[1]

    click_node(page, condensed.pk)
    detail = page.locator("#detail .summary-detail")
    expect(detail).to_have_attribute("data-summary", condensed.pk)
    expect(detail.locator("pre.summary-content")).to_have_text(condensed.content)
    detail.locator("button.expand").click()
    sources = detail.locator(".expansion .source-summary")
    expect(sources).to_have_count(condensed.parent_links.count())
    expect(sources.first).to_have_attribute("data-summary", source)

    # follow a source down, then expand the leaf into its messages
    sources.first.locator("a.node-link").click()
    expect(detail).to_have_attribute("data-summary", source)
    leaf = Summary.objects.get(pk=source)
    while leaf.kind != "leaf":
        leaf = leaf.parent_links.order_by("ordinal").first().parent_summary
        detail.locator(f"dd.sources a[data-summary='{leaf.pk}']").click()
        expect(detail).to_have_attribute("data-summary", leaf.pk)
    detail.locator("button.expand").click()
    expect(detail.locator(".expansion article.message")).to_have_count(
        SummaryMessage.objects.filter(summary=leaf).count()
    )
    assert page.console_errors == []  # includes CSP violations: the vendored assets comply


def test_a_message_leads_to_its_covering_summary(page, user, live_server, small_chunks):
    conversation = ConversationFactory(owner=user, session_id="covered")
    append_messages(conversation, 120)
    compact(conversation)
    message = Message.objects.get(conversation=conversation, seq=2)
    covering = covering_summaries(conversation_id=conversation.pk, message_ids=[message.pk])[
        message.pk
    ]
    leaf = SummaryMessage.objects.get(message=message).summary_id
    sign_in(page, user, live_server)

    page.goto(f"/conversations/{conversation.pk}/?from=1")
    page.locator("#m-2 a.cover.covered").click()
    page.wait_for_selector("body[data-dag-ready=true]")
    expect(page.locator("#covering")).to_have_text(covering)
    expect(page.locator("#detail .summary-detail")).to_have_attribute("data-summary", covering)
    assert page.evaluate(f"window.lcmCy.getElementById('{covering}').hasClass('covering')")
    assert page.evaluate(f"window.lcmCy.getElementById('{leaf}').hasClass('path')")
    on_path = page.evaluate("window.lcmCy.nodes('.path').map(n => n.id())")
    assert leaf in on_path and covering in on_path
    assert page.console_errors == []


def test_search_and_follow_a_hit_into_the_timeline(page, user, live_server, small_chunks):
    conversation = ConversationFactory(owner=user, session_id="searchable")
    append_messages(conversation, 120)
    compact(conversation)
    sign_in(page, user, live_server)

    page.goto(f"/conversations/{conversation.pk}/")
    page.click("#tab-search")
    page.fill("#grep-q", "case_8 ")
    page.select_option("#grep-mode", "regex")
    page.select_option("#grep-scope", "messages")
    page.click("#grep-form button")
    hits = page.locator("#grep-results li.hit")
    expect(hits).to_have_count(1)
    hits.first.locator("a.hit-link").click()
    expect(page).to_have_url(re.compile(r"\?seq=9#m-9$"))
    target = page.locator("#m-9")
    expect(target).to_have_class(re.compile(r"\bhighlight\b"))
    expect(target).to_be_in_viewport()
    expect(target).to_contain_text("case_8")
    assert page.console_errors == []


def test_compact_now_runs_a_job_and_the_new_summary_appears(page, user, live_server, small_chunks):
    conversation = ConversationFactory(owner=user, session_id="to-compact")
    append_messages(conversation, 120)
    sign_in(page, user, live_server)

    page.goto(f"/conversations/{conversation.pk}/")
    expect(page.locator("#context-items li.ctx.summary")).to_have_count(0)
    page.select_option("#compact-mode", "full")
    page.click("#compact-now")
    status = page.locator("#action-status")
    expect(status).to_have_attribute("data-state", "pending")
    # "pending" is shown from the click on; the job row exists once the API has answered
    expect(status).to_have_text(re.compile(r"^job \d+ pending"))
    job = CompactionJob.objects.get(conversation=conversation)
    assert job.mode == "full"

    # what the worker does; the page is polling the job meanwhile
    job_run(job_id=job.pk, summarizer=DeterministicSummarizer())
    expect(status).to_have_attribute("data-state", "succeeded", timeout=15_000)
    expect(status).to_contain_text(f"job {job.pk} succeeded: compacted")
    in_context = list(
        ContextItem.objects.filter(conversation=conversation, summary__isnull=False)
        .order_by("ordinal")
        .values_list("summary_id", flat=True)
    )
    assert in_context
    links = page.locator("#context-items li.ctx.summary a.sid")
    expect(links).to_have_count(len(in_context))
    expect(links.first).to_have_text(in_context[0])
    assert page.console_errors == []


def test_integrity_scan_reports_on_the_page(page, user, live_server, file_storage):
    conversation = ConversationFactory(owner=user, session_id="scan")
    append_messages(conversation, 5)
    sign_in(page, user, live_server)
    page.goto(f"/conversations/{conversation.pk}/")
    page.click("#integrity-scan")
    status = page.locator("#action-status")
    expect(status).to_contain_text("no problems found")
    expect(status).to_have_attribute("data-state", "succeeded")

    # lose a stored file's bytes: the next scan names the problem
    words = " ".join(f"w{i}" for i in range(400))
    append_messages(
        conversation,
        1,
        start=5,
        payload=lambda i: {"role": "user", "content": f'<file name="a.txt">{words}</file>'},
    )
    large_file = LargeFile.objects.get(conversation=conversation)
    storages["large_files"].delete(large_file.storage_key)
    page.click("#integrity-scan")
    expect(status).to_contain_text("1 problem(s): file_object_missing ×1")
    expect(status).to_have_attribute("data-state", "failed")


def test_no_xss_payload_runs_anywhere(page, user, live_server, small_chunks, file_storage):
    conversation = ConversationFactory(
        owner=user, session_id='"><img src=x onerror="window.__xss=3">', title=XSS_TEXT
    )
    append_messages(conversation, 60, payload=xss_payload)
    big_file = " ".join(f"word{i}" for i in range(400))
    append_messages(
        conversation,
        1,
        start=60,
        payload=lambda i: {
            "role": "user",
            "content": f'<file name="{XSS_TEXT}.txt">{XSS_TEXT}\n{big_file}</file>',
        },
    )
    compact(conversation)
    large_file = LargeFile.objects.get(conversation=conversation)
    summary = Summary.objects.filter(conversation=conversation).first()
    sign_in(page, user, live_server)

    pages = [
        "/",
        f"/conversations/{conversation.pk}/",
        f"/conversations/{conversation.pk}/?from=1",
        f"/conversations/{conversation.pk}/dag/",
        f"/conversations/{conversation.pk}/search/?q=script&mode=full_text",
        f"/conversations/{conversation.pk}/search/?q={XSS_TEXT[:20]}&mode=regex",
        "/files/",
        f"/files/{large_file.pk}/",
    ]
    for url in pages:
        page.goto(url)
        page.wait_for_load_state("load")
        no_xss_ran(page)
    page.goto(f"/conversations/{conversation.pk}/dag/")
    page.wait_for_selector("body[data-dag-ready=true]")
    click_node(page, summary.pk)
    expect(page.locator("#detail .summary-detail")).to_have_attribute("data-summary", summary.pk)
    page.locator("#detail button.expand").click()
    page.wait_for_selector("#detail .expansion .expanded")
    no_xss_ran(page)
    page.goto(f"/files/{large_file.pk}/")
    # the name attribute ends at its first quote: the stored name is the <script> part
    assert "<script>" in large_file.file_name
    expect(page.locator(".file-name").first).to_have_text(large_file.file_name)


def test_search_highlights_the_whole_match_as_a_mark_element(page, user, live_server):
    conversation = ConversationFactory(owner=user, session_id="marks")
    append_messages(
        conversation,
        1,
        payload=lambda i: {"role": "user", "content": f"ticket RA-2198-NS broke {XSS_TEXT}"},
    )
    sign_in(page, user, live_server)
    page.goto(f"/conversations/{conversation.pk}/search/?q=RA-2198-NS&mode=full_text")
    marks = page.locator("#grep-results .snippet mark")
    expect(marks).to_have_count(1)
    expect(marks.first).to_have_text("RA-2198-NS")
    expect(page.locator("#grep-results .snippet")).not_to_contain_text("«")
    page.goto(f"/conversations/{conversation.pk}/search/?q=script&mode=regex")
    expect(page.locator("#grep-results .snippet mark").first).to_have_text("script")
    no_xss_ran(page)
    assert page.console_errors == []


def _coding_session() -> list[dict]:
    """A short coding session in the stored text form of an imported agent transcript: a
    request, an edit with its purpose, a failing test, the fix, and a task left open."""

    def call(name: str, call_id: str, given: dict) -> str:
        return f"[tool {name} {call_id}] " + json.dumps(given, sort_keys=True)

    edit = {"file_path": "/repo/src/cache/store.py", "old_string": "ttl = 60"}
    # a long test run, so the summary is much shorter than what it covers
    passed = "\n".join(f"tests/test_store.py::test_expiry_case_{n} PASSED" for n in range(120))
    return [
        {"role": "user", "content": "Make the cache expire after 300 seconds."},
        {
            "role": "assistant",
            "content": "I'll raise the expiry in the store.\n"
            + call("Edit", "t1", {**edit, "new_string": "ttl = EXPIRY_SECONDS"}),
        },
        {"role": "tool", "content": "[tool Edit t1]\nThe file was updated."},
        {"role": "assistant", "content": call("Bash", "t2", {"command": "python -m pytest"})},
        {
            "role": "tool",
            "content": "[tool Bash t2]\nFAILED tests/test_store.py - NameError: name 'EXPIRY_SECONDS' is not defined",
        },
        {
            "role": "assistant",
            "content": "The constant is missing, so I'll define it.\n"
            + call(
                "Edit", "t3", {**edit, "new_string": "EXPIRY_SECONDS = 300\nttl = EXPIRY_SECONDS"}
            ),
        },
        {"role": "tool", "content": "[tool Edit t3]\nThe file was updated."},
        {"role": "assistant", "content": call("Bash", "t4", {"command": "python -m pytest"})},
        {"role": "tool", "content": "[tool Bash t4]\n" + passed},
        {
            "role": "assistant",
            "content": call(
                "TodoWrite",
                "t5",
                {"todos": [{"content": "Document the expiry", "status": "pending"}]},
            ),
        },
        {"role": "assistant", "content": "The tests pass; the expiry is 300 seconds."},
        {"role": "user", "content": "Thanks."},  # the fresh tail: everything before is compacted
    ]


def test_a_summary_page_reads_as_an_account_of_what_happened(page, user, live_server, settings):
    settings.LCM_FRESH_TAIL_COUNT = 0
    conversation = ConversationFactory(owner=user, session_id="account")
    messages_append(
        conversation_id=conversation.pk, messages=[parse_message(m) for m in _coding_session()]
    )
    result = compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
    )
    assert result.status == "compacted", result.detail
    [leaf] = result.summaries_created
    sign_in(page, user, live_server)

    page.goto(f"/conversations/{conversation.pk}/dag/?summary={leaf}")
    detail = page.locator("#detail .summary-detail")
    expect(detail).to_have_attribute("data-summary", leaf)
    sections = detail.locator(".account-section h3")
    expect(sections.first).to_have_text("Asked")
    headings = sections.all_text_contents()
    assert headings[:5] == ["Asked", "Changed", "Errors and outcomes", "Open", "State"]
    section = detail.locator(".account-section")
    expect(section.nth(0)).to_contain_text("Make the cache expire after 300 seconds.")
    expect(section.nth(1)).to_contain_text("store.py edited 2×")
    expect(section.nth(1)).to_contain_text("EXPIRY_SECONDS")
    expect(section.nth(2)).to_contain_text("NameError")
    expect(section.nth(2)).to_contain_text("fixed by editing store.py")
    expect(section.nth(3)).to_contain_text("task (pending): Document the expiry")
    expect(section.nth(4)).to_contain_text("the assistant last said: The tests pass")
    expect(detail.locator("pre.summary-content")).to_be_hidden()  # the text is one click away
    detail.locator("details.summary-text > summary").click()
    expect(detail.locator("pre.summary-content")).to_be_visible()
    assert page.console_errors == []
