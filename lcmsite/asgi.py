import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")
django_application = get_asgi_application()

# MCP Streamable HTTP at /mcp/ (mcpserver/http.py); Django serves everything else.
from mcpserver.http import with_mcp  # noqa: E402  (needs Django set up first)

application = with_mcp(django_application)
gc.freeze()  # as in wsgi.py: start-up objects live as long as the process
