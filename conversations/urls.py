from django.urls import path

from conversations import apis

urlpatterns = [
    path("conversations/", apis.ConversationListCreateApi.as_view(), name="conversation-list"),
    # conversations/<id>/ (GET here, DELETE in security) is routed by lcmsite/urls.py.
    path(
        "conversations/<int:conversation_id>/messages/",
        apis.MessageListCreateApi.as_view(),
        name="message-list",
    ),
    path(
        "conversations/<int:conversation_id>/context-items/",
        apis.ContextItemListApi.as_view(),
        name="context-item-list",
    ),
    path("secret-policy/", apis.OwnerSecretPolicyApi.as_view(), name="secret-policy"),
    path(
        "conversations/<int:conversation_id>/secret-policy/",
        apis.ConversationSecretPolicyApi.as_view(),
        name="conversation-secret-policy",
    ),
    path("secret-findings/", apis.SecretFindingListApi.as_view(), name="secret-finding-list"),
    path(
        "secret-findings/<int:finding_id>/review/",
        apis.SecretFindingReviewApi.as_view(),
        name="secret-finding-review",
    ),
]
