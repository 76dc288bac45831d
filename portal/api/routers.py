from rest_framework.routers import SimpleRouter


class Router(SimpleRouter):
    """Paths as the architecture writes them (`/api/v1/pools`), with a trailing slash optional."""

    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"
