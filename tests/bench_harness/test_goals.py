"""The pure figures of goals 7 and 13: lock waits counted from sampled pg_stat_activity rows,
interleaved windows' CPU ratios, each batch's wait until a reading holds it, the rate of a
sustained feed's answers and the worker's tasks read from its log; and when goals 3 and 5
sample their raw-SQL reference arms."""

from __future__ import annotations

import pytest

from tests.bench.cpu import between
from tests.bench.fresh import visible
from tests.bench.run import reference_due
from tests.bench.sustained import answer_rate, worker_tasks
from tests.bench.waits import Activity, lock_waits, wait_events


def _row(state, wait_type, wait_event, pid=101, at=0.0):
    return Activity(at, pid, state, wait_type, wait_event, "SELECT 1")


SAMPLES = [
    _row("active", "Lock", "transactionid"),  # a row lock: counted
    _row("active", "Lock", "relation", pid=102),  # a table lock: counted
    _row("idle", "Client", "ClientRead"),  # between requests
    _row("idle in transaction", "Lock", "tuple"),  # not running a statement: not counted
    _row("active", "LWLock", "BufferContent"),  # a lightweight lock: not a lock wait
    _row("active", None, None),  # running
    _row("active", None, None, pid=102),
    _row("active", "IO", "DataFileRead"),
]


def test_lock_waits_counts_running_statements_waiting_on_a_heavyweight_lock():
    assert lock_waits(SAMPLES) == 2
    assert lock_waits([r for r in SAMPLES if r.wait_event_type != "Lock"]) == 0
    assert lock_waits([]) == 0


def test_wait_events_of_running_statements_most_frequent_first():
    assert wait_events(SAMPLES) == {
        "CPU": 2,
        "Lock:transactionid": 1,
        "Lock:relation": 1,
        "LWLock:BufferContent": 1,
        "IO:DataFileRead": 1,
    }


def test_between_sets_each_burst_against_the_rest_windows_around_it():
    # R 2.0 B 2.2 R 2.4 B 2.2 R 2.0 (ms a read): 2.2 / 2.2 = 1; 2.2 / 2.2 = 1
    assert between([2.0, 2.4, 2.0], [2.2, 2.2]) == pytest.approx([1.0, 1.0])
    # R 1 B 3 R 2: 3 / 1.5 = 2
    assert between([1.0, 2.0], [3.0]) == [2.0]
    with pytest.raises(ValueError, match="surround"):
        between([1.0, 2.0], [3.0, 3.0])


def test_visible_waits_for_a_reading_holding_the_batch_and_every_one_before_it():
    # Batches accepted at 10, 11 and 12 s; running totals 5, 12, 20 over a baseline of 100.
    accepted = [10.0, 11.0, 12.0]
    totals = [5, 12, 20]
    readings = [
        (9.5, 105),  # before the first batch was accepted: does not count for it
        (10.5, 100),  # nothing yet
        (11.5, 105),  # the first batch: 1.5 s
        (12.5, 112),  # the second: 1.5 s
        (14.0, 125),  # the third, and more (a later batch's too): 2.0 s
    ]
    assert visible(accepted, totals, readings, baseline=100) == [1.5, 1.5, 2.0]


def test_visible_says_none_for_a_batch_no_reading_holds():
    assert visible([1.0, 2.0], [3, 7], [(1.5, 3), (2.5, 6)], baseline=0) == [0.5, None]


def test_answer_rate_counts_the_batches_after_the_first_over_their_answers_span():
    # 5 batches of 1,000 answered every 0.2 s (out of order): 4,000 events in 0.8 s
    assert answer_rate([10.0, 10.4, 10.2, 10.8, 10.6]) == pytest.approx(5_000)
    # a server falling behind: each answer 0.25 s after the one before
    assert answer_rate([0.0, 0.25, 0.5, 0.75, 1.0]) == pytest.approx(4_000)
    assert answer_rate([3.0]) == 0.0


LOG = """\
[2026-12-07 00:15:26,732: INFO/ForkPoolWorker-2] rate: 200 tenant-months
[2026-12-07 00:15:26,732: INFO/ForkPoolWorker-2] Task billing.rate[6ac8-83e] succeeded in 27.25s: None
[2026-12-07 00:15:27,567: INFO/ForkPoolWorker-2] Task flywheel.measure[22e2-f12] succeeded in 0.5s: None
[2026-12-07 00:15:33,686: INFO/MainProcess] Task billing.rate[8021-9a5] received
[2026-12-07 00:16:02,419: INFO/ForkPoolWorker-2] Task billing.rate[8021-9a5] succeeded in 28.75s: None
[2026-12-07 00:16:04,299: INFO/ForkPoolWorker-2] Task metering.fold[16ff-b27] succeeded in 5.5s: None
"""


def test_worker_tasks_sums_each_task_from_the_worker_log_busiest_first():
    tasks = worker_tasks(LOG)
    assert list(tasks) == ["billing.rate", "metering.fold", "flywheel.measure"]
    assert tasks["billing.rate"] == {"runs": 2, "seconds": 56.0, "slowest": 28.75}
    assert tasks["metering.fold"] == {"runs": 1, "seconds": 5.5, "slowest": 5.5}
    assert worker_tasks("no task here") == {}


def test_a_reference_arm_is_sampled_first_and_last_and_between_while_within_ten_times():
    # goal 3's raw usage SQL, 14 slots, target 0.05: at 0.004 (12.5 times inside) the first
    # and the last slot only; at 0.006 (8.3 times inside) every slot
    assert [reference_due(slot, 13, 0.004, 0.05) for slot in range(14)] == [
        True, *[False] * 12, True,
    ]  # fmt: skip
    assert all(reference_due(slot, 13, 0.006, 0.05) for slot in range(14))
    # goal 5's raw KPI SQL, 3 rounds, target 0.3: 0.025 is 12 times inside, 0.031 is not
    assert [reference_due(n, 2, 0.025, 0.3) for n in range(3)] == [True, False, True]
    assert reference_due(1, 2, 0.031, 0.3)
    # before both arms have a sample there is no ratio: sampled
    assert reference_due(1, 2, float("nan"), 0.3)
