from django.urls import path

from receipts import apis

urlpatterns = [
    path(
        "conversations/<int:conversation_id>/receipts/",
        apis.ConversationReceiptsApi.as_view(),
        name="conversation-receipts",
    ),
    path("receipts/<str:receipt_id>/", apis.ReceiptDetailApi.as_view(), name="receipt-detail"),
    path(
        "receipts/<str:receipt_id>/request/",
        apis.ReceiptRequestApi.as_view(),
        name="receipt-request",
    ),
    path("receipts/<str:receipt_id>/diff/", apis.ReceiptDiffApi.as_view(), name="receipt-diff"),
]
