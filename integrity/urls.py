from django.urls import path

from integrity import apis

urlpatterns = [
    path("integrity/", apis.IntegrityScanApi.as_view(), name="integrity-scan"),
    path(
        "integrity/reports/<int:report_id>/",
        apis.IntegrityReportDetailApi.as_view(),
        name="integrity-report-detail",
    ),
    path(
        "integrity/plans/<int:plan_id>/",
        apis.RepairPlanDetailApi.as_view(),
        name="repair-plan-detail",
    ),
    path(
        "integrity/plans/<int:plan_id>/apply/",
        apis.RepairPlanApplyApi.as_view(),
        name="repair-plan-apply",
    ),
]
