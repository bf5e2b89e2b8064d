"""Shapes of the integrity API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.requests import RequestSerializer
from integrity import selectors
from integrity.models import IntegrityReport, RepairPlan, ScanMode


class IntegrityScanRequestSerializer(RequestSerializer):
    conversation_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    mode = serializers.ChoiceField(choices=ScanMode.choices, default=ScanMode.SCAN)


class IntegrityCheckSerializer(serializers.Serializer):
    name = serializers.CharField()
    count = serializers.IntegerField()
    examples = serializers.ListField(child=serializers.DictField(), max_length=20)


class RepairPlanSerializer(serializers.ModelSerializer):
    applied_by = serializers.CharField(source="applied_by.username", default=None, allow_null=True)

    class Meta:
        model = RepairPlan
        fields = [
            "id",
            "report",
            "conversation",
            "status",
            "actions",
            "created_at",
            "applied_by",
            "applied_at",
            "outcome",
            "error",
            "after_report",
        ]


class IntegrityReportSerializer(serializers.ModelSerializer):
    conversation_id = serializers.IntegerField(allow_null=True)
    checks = IntegrityCheckSerializer(many=True)
    plans = serializers.SerializerMethodField()

    class Meta:
        model = IntegrityReport
        fields = [
            "id",
            "conversation_id",
            "mode",
            "trigger",
            "total_problems",
            "checks",
            "duration_ms",
            "created_at",
            "plans",
        ]

    @extend_schema_field(RepairPlanSerializer(many=True))
    def get_plans(self, report: IntegrityReport) -> list[dict]:
        return RepairPlanSerializer(selectors.report_plans(report=report), many=True).data
