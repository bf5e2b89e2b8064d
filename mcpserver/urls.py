from django.urls import path

from mcpserver import apis

urlpatterns = [
    path("hooks/session-start/", apis.SessionStartHookApi.as_view(), name="hooks-session-start"),
]
