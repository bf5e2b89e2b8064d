from django.urls import path

from memory import apis

urlpatterns = [
    path(
        "branches/<str:branch_id>/retrieve/",
        apis.BranchRetrieveApi.as_view(),
        name="branch-retrieve",
    ),
    path("branches/<str:branch_id>/chunks/", apis.BranchChunksApi.as_view(), name="branch-chunks"),
]
