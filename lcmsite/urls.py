from django.contrib import admin
from django.http import HttpResponse
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.api.views import api_not_found
from core.metrics import metrics_view
from dropin import views as dropin_views
from dropin.urls import anthropic_urls, openai_urls
from lcmsite.apis import ConversationDetailDeleteApi, SessionDetailDeleteApi
from mcpserver.views import mcp_needs_asgi
from security.metrics_guard import metrics_guard

api_v1 = [
    # One URL, two apps: GET from the owning app, DELETE (hard delete) from security.
    path(
        "conversations/<int:conversation_id>/",
        ConversationDetailDeleteApi.as_view(),
        name="conversation-detail",
    ),
    path("sessions/<str:session_id>/", SessionDetailDeleteApi.as_view(), name="session-detail"),
    path("", include("largefiles.urls")),
    path("", include("conversations.urls")),
    path("", include("compaction.urls")),
    path("", include("retrieval.urls")),
    path("", include("integrity.urls")),
    path("", include("turns.urls")),
    path("", include("memory.urls")),
    path("", include("importers.urls")),
    path("", include("security.urls")),
    path("", include("retention.urls")),  # docs/retention.md
    path("", include("mcpserver.urls")),  # the hooks' API (docs/capture.md)
    path("", include("receipts.urls")),  # docs/receipts.md
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Any character, newlines too (`<path:>` stops at them and Django would answer HTML).
    re_path(r"^(?P<unknown>[\s\S]+)$", api_not_found),
]


def no_favicon(request):
    """Browsers ask for /favicon.ico beside any page they show raw (a replayed request
    body, a JSON answer): a 204 keeps that out of the console and the logs as a 404."""
    return HttpResponse(status=204, headers={"Cache-Control": "max-age=86400"})


urlpatterns = [
    path("favicon.ico", no_favicon),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("metrics", metrics_guard(metrics_view), name="metrics"),  # docs/deploy.md
    # Only reached outside lcm_serve (its ASGI app answers /mcp/ first): a clear 404.
    re_path(r"^mcp/?$", mcp_needs_asgi, name="mcp-needs-asgi"),
    path("chat/", include("console.urls")),
    # Drop-in: the OpenAI and Anthropic wires (docs/drop-in.md).
    path("openai/v1/", include(openai_urls)),
    path("anthropic/v1/", include(anthropic_urls)),
    re_path(r"^anthropic/?$", dropin_views.anthropic_base, name="dropin-anthropic-base"),
    path("", include("explorer.urls")),
]
