from django.urls import path

from importers import apis

urlpatterns = [
    path("imports/", apis.ImportCreateApi.as_view(), name="import-create"),
    path("imports/watch/", apis.WatchReceiveApi.as_view(), name="import-watch"),
    path("imports/sessions/", apis.AgentSessionListApi.as_view(), name="import-sessions"),
    path("imports/<int:job_id>/", apis.ImportDetailApi.as_view(), name="import-detail"),
    path(
        "conversations/<int:conversation_id>/export/",
        apis.ConversationExportApi.as_view(),
        name="conversation-export",
    ),
]
