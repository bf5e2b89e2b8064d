from django.urls import include, path

from turns import apis

urlpatterns = [
    # The lead's streaming routes first: POST sessions/{id}/turns/ and the SSE stream.
    path("", include("turns.stream_urls")),
    path("sessions/", apis.SessionListCreateApi.as_view(), name="session-list"),
    # sessions/<id>/ (GET here, DELETE in security) is routed by lcmsite/urls.py.
    path(
        "sessions/<str:session_id>/activate-branch/",
        apis.SessionActivateBranchApi.as_view(),
        name="session-activate-branch",
    ),
    path("turns/<str:turn_id>/", apis.TurnDetailApi.as_view(), name="turn-detail"),
    path("turns/<str:turn_id>/context/", apis.TurnContextApi.as_view(), name="turn-context"),
    path("steps/<str:step_id>/", apis.StepDetailApi.as_view(), name="step-detail"),
    path("branches/<str:branch_id>/", apis.BranchDetailApi.as_view(), name="branch-detail"),
    path("branches/<str:branch_id>/fork/", apis.BranchForkApi.as_view(), name="branch-fork"),
    path(
        "branches/<str:branch_id>/rollback/",
        apis.BranchRollbackApi.as_view(),
        name="branch-rollback",
    ),
    path("branches/<str:branch_id>/state/", apis.BranchStateApi.as_view(), name="branch-state"),
    path("branches/<str:branch_id>/pins/", apis.BranchPinsApi.as_view(), name="branch-pins"),
    path(
        "branches/<str:branch_id>/pins/<str:pin_id>/",
        apis.BranchPinDeleteApi.as_view(),
        name="branch-pin-delete",
    ),
    path("branches/<str:branch_id>/commit/", apis.BranchCommitApi.as_view(), name="branch-commit"),
    path("models/", apis.ModelListApi.as_view(), name="model-list"),
]
