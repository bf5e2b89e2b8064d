from django.urls import path

from retention import apis

urlpatterns = [
    path("retention/policy/", apis.UserPolicyApi.as_view(), name="retention-policy"),
    path(
        "conversations/<int:conversation_id>/retention/",
        apis.ConversationRetentionApi.as_view(),
        name="conversation-retention",
    ),
]
