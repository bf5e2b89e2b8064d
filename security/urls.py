from django.urls import path

from security import apis

urlpatterns = [
    path("exports/", apis.ExportApi.as_view(), name="export-create"),
]
