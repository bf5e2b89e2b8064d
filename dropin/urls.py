from django.urls import path

from dropin import views

openai_urls = [
    path("chat/completions", views.chat_completions, name="dropin-chat-completions"),
    path("models", views.openai_models, name="dropin-models"),
    path("responses", views.responses, name="dropin-responses"),
    path("responses/<str:response_id>", views.response_detail, name="dropin-response"),
]
anthropic_urls = [
    path("messages", views.anthropic_messages, name="dropin-messages"),
    path("messages/count_tokens", views.anthropic_count_tokens, name="dropin-count-tokens"),
]
