"""A progress bar for the demo steps on plain stdout."""

from django.core.management.base import OutputWrapper

BAR_WIDTH = 30


class Progress:
    """A progress bar on plain stdout (`\r  label [#####     ]  50%`), redrawn only when it
    moves; `finish` ends the line."""

    def __init__(self, *, stdout, label: str, total: int) -> None:
        self.stdout, self.label, self.total = stdout, label, max(1, total)
        self.count = 0
        self._shown: tuple[int, int] | None = None
        self._draw()

    def advance(self, count: int = 1) -> None:
        self.count = min(self.total, self.count + count)
        self._draw()

    def finish(self, note: str = "") -> None:
        self.count = self.total
        self._draw()
        self._write(f"  {note}\n" if note else "\n")

    def _draw(self) -> None:
        filled = BAR_WIDTH * self.count // self.total
        percent = 100 * self.count // self.total
        if self._shown == (filled, percent):
            return
        self._shown = (filled, percent)
        bar = "#" * filled + " " * (BAR_WIDTH - filled)
        self._write(f"\r  {self.label} [{bar}] {percent:3d}%")

    def _write(self, text: str) -> None:
        if isinstance(self.stdout, OutputWrapper):
            self.stdout.write(text, ending="")  # it would end every redraw with a newline
        else:
            self.stdout.write(text)
        self.stdout.flush()
