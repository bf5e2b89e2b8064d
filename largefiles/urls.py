from django.urls import path

from largefiles import apis

urlpatterns = [
    path("files/<str:file_id>/", apis.LargeFileDetailApi.as_view(), name="file-detail"),
    path("files/<str:file_id>/content/", apis.LargeFileContentApi.as_view(), name="file-content"),
]
