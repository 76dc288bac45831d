import gc
import os
from importlib import import_module

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from portal.pdf import pdf_warm

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()

# Import every view now (Django would on the first request), then move what start-up
# allocated into the collector's permanent generation: a full collection then no longer
# walks the ~150,000 objects of Django, DRF and Plotly, which added ~70 ms to whichever
# request it fell in (docs/performance.md). A forked worker also shares those pages longer.
import_module(settings.ROOT_URLCONF)
pdf_warm()  # WeasyPrint's fonts, loaded here rather than by a worker's first PDF (~1 s)
gc.freeze()
