"""The one error a service raises for bad input: which field, and why. The API's exception
handler answers it with a 400 naming the field; pages show it next to the field. Pure
Python, so the engines (the `domain` packages) raise it too."""


class FieldError(Exception):
    """Invalid or refused input; `field` names it ("" for the request as a whole)."""

    http_status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def api_errors(self) -> list[dict]:
        return [{"field": self.field, "message": self.message}]
