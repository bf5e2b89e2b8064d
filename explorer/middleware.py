"""Content-Security-Policy for every HTML page the app serves.

The explorer renders untrusted text (messages, summaries, file names). Escaping is the
first defence; this header is the second: no inline script, no script from anywhere but
this origin, no plugins, no framing, forms post only back here. The API's JSON responses
do not need it, and the Swagger page (a third-party template with an inline bootstrap
script) is left alone.
"""

from __future__ import annotations

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)

EXEMPT_PREFIXES = ("/api/v1/docs/",)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if content_type.startswith("text/html") and not request.path.startswith(EXEMPT_PREFIXES):
            response.setdefault("Content-Security-Policy", POLICY)
        return response
