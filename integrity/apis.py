"""Integrity API: run a scan (optionally with repair plans), read reports and plans, and
apply a plan. A scan of every conversation is for staff; anything about one conversation
goes through the access checkpoint (another user's is a 404)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.selectors import conversation_get_for_user
from core.api.errors import LcmError, NotFound
from integrity import selectors, serializers, services
from integrity.models import IntegrityReport, Trigger


class StaffOnly(LcmError):
    status = 403
    code = "permission_denied"


def _report_data(report: IntegrityReport) -> dict:
    return serializers.IntegrityReportSerializer(report).data


def _check_report_access(user, report: IntegrityReport) -> None:
    if report.conversation_id is None:
        if not user.is_staff:
            raise NotFound(f"integrity report {report.pk} not found")
        return
    conversation_get_for_user(user=user, conversation_id=report.conversation_id)


class IntegrityScanApi(APIView):
    @extend_schema(
        operation_id="integrity_scan",
        request=serializers.IntegrityScanRequestSerializer,
        responses={201: serializers.IntegrityReportSerializer},
        description=(
            "Runs every integrity check over one conversation (or, for staff, all of them) "
            "and stores the report. `scan_and_plan` also stores repair plans, which are "
            "never applied automatically."
        ),
    )
    def post(self, request):
        body = serializers.IntegrityScanRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        conversation_id = body.validated_data.get("conversation_id")
        if conversation_id is None:
            if not request.user.is_staff:
                raise StaffOnly("only staff may scan every conversation; give conversation_id")
        else:
            conversation_get_for_user(user=request.user, conversation_id=conversation_id)
        report = services.integrity_scan(
            conversation_id=conversation_id,
            mode=body.validated_data["mode"],
            trigger=Trigger.API,
            user=request.user,
        )
        return Response(_report_data(report), status=status.HTTP_201_CREATED)


class IntegrityReportDetailApi(APIView):
    @extend_schema(
        operation_id="integrity_report_retrieve",
        responses=serializers.IntegrityReportSerializer,
    )
    def get(self, request, report_id: int):
        report = IntegrityReport.objects.filter(pk=report_id).first()
        if report is None:
            raise NotFound(f"integrity report {report_id} not found")
        _check_report_access(request.user, report)
        return Response(_report_data(report))


def _plan_for(user, plan_id: int):
    plan = selectors.plan_get(plan_id=plan_id)
    if plan is None:
        raise NotFound(f"repair plan {plan_id} not found")
    conversation_get_for_user(user=user, conversation_id=plan.conversation_id)
    return plan


class RepairPlanDetailApi(APIView):
    @extend_schema(operation_id="repair_plan_retrieve", responses=serializers.RepairPlanSerializer)
    def get(self, request, plan_id: int):
        return Response(serializers.RepairPlanSerializer(_plan_for(request.user, plan_id)).data)


class RepairPlanApplyApi(APIView):
    @extend_schema(
        operation_id="repair_plan_apply",
        request=None,
        responses={200: serializers.RepairPlanSerializer},
        description=(
            "Applies a proposed plan's automatic actions under the conversation lock, "
            "records who applied it and what each action did, then scans the conversation "
            "again (`after_report`). A plan applies once: again is a 409."
        ),
    )
    def post(self, request, plan_id: int):
        plan = _plan_for(request.user, plan_id)
        applied = services.repair_plan_apply(plan_id=plan.pk, user=request.user)
        return Response(serializers.RepairPlanSerializer(applied).data)
