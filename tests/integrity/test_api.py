"""POST /api/v1/integrity/ and the report and plan endpoints: access and shapes."""

from __future__ import annotations

import pytest

from integrity.models import IntegrityReport, PlanStatus, RepairPlan

pytestmark = pytest.mark.usefixtures("large_file_storage")
URL = "/api/v1/integrity/"


def test_the_owner_scans_a_conversation_and_gets_the_report(api, broken):
    conversation, message = broken
    response = api.post(URL, {"conversation_id": conversation.pk}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["conversation_id"] == conversation.pk
    assert body["mode"] == "scan"
    assert body["trigger"] == "api"
    assert body["total_problems"] == 1
    assert body["plans"] == []
    by_name = {check["name"]: check for check in body["checks"]}
    assert len(by_name) == 20  # 16, the three archive checks (docs/retention.md), part order
    assert by_name["unreachable_message"] == {
        "name": "unreachable_message",
        "count": 1,
        "examples": [
            {
                "conversation_id": conversation.pk,
                "message_id": message.pk,
                "seq": 15,
                "covering_summary_id": None,
            }
        ],
    }
    assert all(c["count"] == 0 for n, c in by_name.items() if n != "unreachable_message")


def test_scan_and_plan_returns_the_stored_plan_and_applies_nothing(api, broken):
    conversation, message = broken
    response = api.post(
        URL, {"conversation_id": conversation.pk, "mode": "scan_and_plan"}, format="json"
    )
    assert response.status_code == 201
    [plan] = response.json()["plans"]
    assert plan["status"] == "proposed"
    assert plan["conversation"] == conversation.pk
    assert [a["action"] for a in plan["actions"]] == ["reinsert_context_item"]
    assert RepairPlan.objects.get(pk=plan["id"]).status == PlanStatus.PROPOSED
    assert plan["applied_by"] is None  # not applied yet: the schema says nullable


def test_the_schema_says_a_plan_not_yet_applied_has_no_applier(openapi_schema):
    applied_by = openapi_schema["components"]["schemas"]["RepairPlan"]["properties"]["applied_by"]
    # OpenAPI 3.1: nullable is spelled as a type list (docs/reliability.md).
    assert applied_by == {"type": ["string", "null"]}


def test_the_owner_applies_a_plan_and_sees_the_scan_after(api, broken, user):
    conversation, _ = broken
    created = api.post(
        URL, {"conversation_id": conversation.pk, "mode": "scan_and_plan"}, format="json"
    )
    plan_id = created.json()["plans"][0]["id"]
    response = api.post(f"{URL}plans/{plan_id}/apply/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "applied"
    assert body["applied_by"] == user.username
    after = api.get(f"{URL}reports/{body['after_report']}/")
    assert after.status_code == 200
    assert after.json()["total_problems"] == 0
    again = api.post(f"{URL}plans/{plan_id}/apply/")
    assert again.status_code == 409
    assert again.json()["code"] == "conflict"
    assert again.headers["Retry-After"] == "1"


def test_another_user_gets_404_for_scans_reports_and_plans(api, other_api, broken):
    conversation, _ = broken
    created = api.post(
        URL, {"conversation_id": conversation.pk, "mode": "scan_and_plan"}, format="json"
    )
    report_id, plan_id = created.json()["id"], created.json()["plans"][0]["id"]
    reports = IntegrityReport.objects.count()
    response = other_api.post(URL, {"conversation_id": conversation.pk}, format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert IntegrityReport.objects.count() == reports
    assert other_api.get(f"{URL}reports/{report_id}/").status_code == 404
    assert other_api.get(f"{URL}plans/{plan_id}/").status_code == 404
    assert other_api.post(f"{URL}plans/{plan_id}/apply/").status_code == 404
    assert RepairPlan.objects.get(pk=plan_id).status == PlanStatus.PROPOSED


def test_anonymous_gets_401_and_nothing_is_stored(anon_api, broken):
    conversation, _ = broken
    response = anon_api.post(URL, {"conversation_id": conversation.pk}, format="json")
    assert response.status_code == 401
    assert set(response.json()) == {"code", "message", "extra"}
    assert IntegrityReport.objects.count() == 0


def test_staff_scan_any_conversation_and_all_of_them(staff_api, api, broken):
    conversation, _ = broken
    one = staff_api.post(URL, {"conversation_id": conversation.pk}, format="json")
    assert one.status_code == 201
    everything = staff_api.post(URL, {"mode": "scan_and_plan"}, format="json")
    assert everything.status_code == 201
    assert everything.json()["conversation_id"] is None
    assert everything.json()["total_problems"] == 1
    # A full-scan report is staff-only; its plan belongs to the owner's conversation.
    report_id = everything.json()["id"]
    assert api.get(f"{URL}reports/{report_id}/").status_code == 404
    plan_id = everything.json()["plans"][0]["id"]
    assert api.get(f"{URL}plans/{plan_id}/").status_code == 200


def test_a_user_may_not_scan_every_conversation(api, broken):
    response = api.post(URL, {"mode": "scan"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert IntegrityReport.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"mode": "repair"}, "mode"),
        ({"conversation_id": "x"}, "conversation_id"),
        ({"conversation_id": 0}, "conversation_id"),
    ],
)
def test_bad_input_is_a_400_and_stores_nothing(staff_api, broken, body, field):
    response = staff_api.post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert field in response.json()["message"]
    assert IntegrityReport.objects.count() == 0


def test_a_missing_conversation_is_a_404(staff_api, db):
    response = staff_api.post(URL, {"conversation_id": 99999999}, format="json")
    assert response.status_code == 404
    assert IntegrityReport.objects.count() == 0


def test_failures_are_counted_in_the_metrics(api, broken, client):
    conversation, _ = broken
    api.post(URL, {"conversation_id": conversation.pk}, format="json")
    api.post(URL, {"conversation_id": conversation.pk}, format="json")
    text = client.get("/metrics").content.decode()
    assert "# TYPE lcm_integrity_failures_total counter" in text
    assert 'lcm_integrity_failures_total{check="unreachable_message"} 2' in text
    assert 'lcm_integrity_failures_total{check="lineage_cycle"} 0' in text


def test_reports_and_plans_for_anonymous_and_staff(api, anon_api, staff_api, staff_user, broken):
    conversation, _ = broken
    created = api.post(
        URL, {"conversation_id": conversation.pk, "mode": "scan_and_plan"}, format="json"
    ).json()
    report_id, plan_id = created["id"], created["plans"][0]["id"]
    for method, url in (
        ("get", f"{URL}reports/{report_id}/"),
        ("get", f"{URL}plans/{plan_id}/"),
        ("post", f"{URL}plans/{plan_id}/apply/"),
    ):
        response = getattr(anon_api, method)(url)
        assert response.status_code == 401, url
    assert RepairPlan.objects.get(pk=plan_id).status == PlanStatus.PROPOSED
    assert staff_api.get(f"{URL}reports/{report_id}/").json()["total_problems"] == 1
    assert staff_api.get(f"{URL}plans/{plan_id}/").json()["status"] == "proposed"
    applied = staff_api.post(f"{URL}plans/{plan_id}/apply/")
    assert applied.status_code == 200
    assert applied.json()["applied_by"] == staff_user.username


def test_unknown_reports_and_plans_are_404(api, db):
    assert api.get(f"{URL}reports/987654/").status_code == 404
    assert api.get(f"{URL}plans/987654/").status_code == 404
    assert api.post(f"{URL}plans/987654/apply/").status_code == 404
