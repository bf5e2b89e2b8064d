import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")
application = get_wsgi_application()
# Move everything loaded at start-up (Django, apps, URL conf) out of the collector's reach:
# these objects live as long as the process, and rescanning them on every full collection
# cost ~20% of a 1,000-message ingest batch (docs/benchmarks.md).
gc.freeze()
