"""`/mcp/` under a server that is not `lcm_serve`.

The MCP endpoint is an ASGI app mounted beside Django by `lcmsite/asgi.py` (it holds a
long-lived session manager, which WSGI has no place for), so under `manage.py runserver`
(WSGI) Django sees the path. It answers a clear 404 instead of a page that says nothing:
serve with `manage.py lcm_serve`, or use the stdio server (`manage.py lcm_mcp`)."""

from __future__ import annotations

from django.views.decorators.csrf import csrf_exempt

from core.api.errors import json_error

MESSAGE = (
    "MCP over HTTP is served only by `manage.py lcm_serve` (the ASGI server), not by "
    "`manage.py runserver`; run lcm_serve, or use the stdio server `manage.py lcm_mcp` "
    "(docs/mcp.md)"
)


@csrf_exempt
def mcp_needs_asgi(request):
    return json_error(404, "mcp_not_served_here", MESSAGE, {"serve_with": "manage.py lcm_serve"})
