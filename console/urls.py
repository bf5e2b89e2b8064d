from django.urls import include, path

from console import views

app_name = "console"

session_patterns = [
    path("", views.chat, name="chat"),
    path("status/", views.status_json, name="status"),
    path("history/", views.history_fragment, name="history"),
    path("branches/", views.branches_fragment, name="branches"),
    path("pins/", views.pins_fragment, name="pins"),
    path("pending/", views.pending_fragment, name="pending"),
    path("turns/<str:turn_id>/", views.turn_fragment, name="turn"),
    path("turns/<str:turn_id>/context/", views.turn_context, name="turn-context"),
]

urlpatterns = [
    path("", views.session_list, name="session-list"),
    path("<str:session_id>/", include(session_patterns)),
]
