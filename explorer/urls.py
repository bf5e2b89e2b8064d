from django.contrib.auth import views as auth_views
from django.urls import include, path

from explorer import calls, views

app_name = "explorer"

# Everything under /conversations/<id>/ (each view asks the access checkpoint first).
conversation_patterns = [
    path("", views.conversation_detail, name="conversation"),
    path("context/", views.context_items_fragment, name="context-items"),
    path("context-panel/", views.context_panel_fragment, name="context-panel"),
    path("search/", views.conversation_search, name="search"),
    path("dag/", views.summary_dag, name="dag"),
    path("summaries/<str:summary_id>/", views.summary_detail_fragment, name="summary-detail"),
    path(
        "summaries/<str:summary_id>/expand/", views.summary_expand_fragment, name="summary-expand"
    ),
    path("calls/", calls.call_timeline, name="calls"),
    path("calls/<str:receipt_id>/", calls.receipt_page, name="receipt"),
    path("seen/<str:kind>/<str:item_id>/", calls.calls_that_saw, name="calls-that-saw"),
]

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path(
        "accounts/logout/",
        auth_views.LogoutView.as_view(next_page="/accounts/login/"),
        name="logout",
    ),
    path("", views.conversation_list, name="conversation-list"),
    path("conversations/<int:conversation_id>/", include(conversation_patterns)),
    path("files/", views.file_list, name="file-list"),
    path("files/<str:file_id>/", views.file_detail, name="file"),
]
