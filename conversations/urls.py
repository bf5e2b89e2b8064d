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
]
