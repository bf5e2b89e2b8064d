from django.urls import path

from compaction import apis

urlpatterns = [
    path(
        "conversations/<int:conversation_id>/compact/",
        apis.CompactApi.as_view(),
        name="conversation-compact",
    ),
    path(
        "conversations/<int:conversation_id>/assemble/",
        apis.AssembleApi.as_view(),
        name="conversation-assemble",
    ),
    path("jobs/<int:job_id>/", apis.JobDetailApi.as_view(), name="job-detail"),
]
