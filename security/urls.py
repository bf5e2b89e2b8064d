from django.urls import path

from security import apis

urlpatterns = [
    path("exports/", apis.ExportApi.as_view(), name="export-create"),
    path("exports/<str:export_id>/", apis.ExportDetailApi.as_view(), name="export-detail"),
    path(
        "exports/<str:export_id>/archive/",
        apis.ExportArchiveApi.as_view(),
        name="export-archive",
    ),
    path(
        "conversations/<int:conversation_id>/redactions/",
        apis.ConversationRedactionApi.as_view(),
        name="conversation-redactions",
    ),
    path(
        "sessions/<str:session_id>/redactions/",
        apis.SessionRedactionApi.as_view(),
        name="session-redactions",
    ),
    path("redactions/", apis.UserRedactionApi.as_view(), name="redactions-create"),
    path(
        "redactions/<str:redaction_id>/",
        apis.RedactionDetailApi.as_view(),
        name="redaction-detail",
    ),
]
