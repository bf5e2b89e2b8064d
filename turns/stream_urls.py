"""The streaming endpoints (turns/streaming.py); included first by turns/urls.py.

`sessions/{id}/turns/` answers GET with the history (turns.apis.TurnListApi, which
TurnCreateApi extends) and POST with a new turn."""

from django.urls import path

from turns import streaming

urlpatterns = [
    path("sessions/<str:session_id>/turns/", streaming.TurnCreateApi.as_view(), name="turn-create"),
    path("turns/<str:turn_id>/stream/", streaming.TurnStreamApi.as_view(), name="turn-stream"),
]
