"""Content negotiation of the views that write files themselves (exports)."""

from rest_framework.negotiation import DefaultContentNegotiation


class FileNegotiation(DefaultContentNegotiation):
    """`?format=` names the file the view writes (csv, parquet, xlsx), not a renderer:
    answers are files, and errors JSON."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type
