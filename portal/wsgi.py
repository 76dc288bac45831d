import gc
import os
from importlib import import_module
from pathlib import Path

import plotly.graph_objects as go
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.template import engines

from portal.charts import base_layout, figure_json
from portal.pdf import pdf_warm

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()


def templates_warm() -> None:
    """Compile every template of the portal's own (the cached loader keeps them) and import
    the context processors, as the first requests would: some 21,000 objects a worker
    otherwise allocates later, which every full collection then walks."""
    engine = engines["django"].engine
    engine.template_context_processors  # noqa: B018 (imports them)
    for folder in settings.TEMPLATES[0]["DIRS"]:
        for path in sorted(Path(folder).rglob("*.html")):
            engine.get_template(path.relative_to(folder).as_posix())


def charts_warm() -> None:
    """Draw a chart as a worker's first would: Plotly loads its validators' parameters then
    (some 13,000 objects)."""
    figure_json(go.Figure(go.Scatter(x=[0], y=[0]), layout=base_layout(y_title="")))


# Import every view and compile every template now (Django would on the first requests),
# then move what start-up allocated into the collector's permanent generation: a full
# collection then no longer walks the ~200,000 objects of Django, DRF, Plotly and the
# templates, which added 30-70 ms to whichever request it fell in (docs/performance.md). A
# forked worker also shares those pages longer.
import_module(settings.ROOT_URLCONF)
templates_warm()
charts_warm()
pdf_warm()  # WeasyPrint's fonts, loaded here rather than by a worker's first PDF (~1 s)
gc.freeze()
