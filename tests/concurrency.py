"""Running a piece of work in several threads at once, for the tests of concurrent writers."""

import threading

from django.db import connections


def run_together(work, args, *, timeout=None) -> tuple[list, list[BaseException]]:
    """Calls `work(arg)` for each of `args`, each in a thread of its own, all released at the
    same moment by a barrier; each thread closes its database connections when done. Returns
    the results in the order of `args` (None where the call raised) and the errors raised,
    which the caller asserts on in the test's own thread."""
    barrier = threading.Barrier(len(args))
    results: list = [None] * len(args)
    errors: list[BaseException] = []

    def run(index, arg):
        try:
            barrier.wait()
            results[index] = work(arg)
        except BaseException as error:  # reported to the caller, in the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(args)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return results, errors
