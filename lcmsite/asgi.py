import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")
application = get_asgi_application()
gc.freeze()  # as in wsgi.py: start-up objects live as long as the process
