"""A Django process bound to one benchmark database (its DATABASE_URL): reads one JSON command
per line on stdin ({"op": name, "args": {...}}), runs tests.bench.ops.<name>, answers one JSON
line ({"ok": true, "result": ...} or {"ok": false, "error": traceback}).

Run by tests/bench/run.py, so that measurements on the small and the large database can be
interleaved (A B A B) while each process keeps its own connection and warm caches.
"""

import json
import os
import sys
import traceback


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # anything Django prints must not mix with the answers
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from tests.bench import ops

    answers.write(json.dumps({"ok": True, "result": "ready"}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        try:
            result = getattr(ops, command["op"])(**command.get("args", {}))
            answer = {"ok": True, "result": result}
        except Exception:  # reported to the orchestrator, which stops the run
            answer = {"ok": False, "error": traceback.format_exc()}
        answers.write(json.dumps(answer, default=str) + "\n")


if __name__ == "__main__":
    main()
