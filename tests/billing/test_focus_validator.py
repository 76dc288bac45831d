"""The FOCUS export as the FinOps Foundation's validator reads it: `focus-validator` (FOCUS 1.2
rules, their own copy: no download) passes the CSV and the Parquet files of a month with
usage, a prepaid purchase and its draw, and of a month with a credit note (the two months
read as one file a format, in one run of the validator). The validator
needs Python >= 3.12: it runs from the test-only environment scripts/focus-validator.sh
installs, named by FOCUS_VALIDATOR (`make test` sets it)."""

from __future__ import annotations

import io
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

VALIDATOR = os.environ.get("FOCUS_VALIDATOR", "")
pytestmark = pytest.mark.skipif(
    not VALIDATOR, reason="FOCUS_VALIDATOR unset: scripts/focus-validator.sh installs it"
)

# Rules the validator itself marks as conditional (the final -C of their ids) on data these
# files have no reason to hold, each with why it does not apply.
NOT_APPLICABLE: dict[str, str] = {
    "InvoiceId-C-004-C": (
        "'InvoiceId MUST be null when the charge is not associated either with an invoice or "
        "with a pre-generated provisional invoice': every row here is associated with one (an "
        "invoice's line, a purchase's invoice, a credit note), and InvoiceId names it; the "
        "rule's model (model-1.2.0.1.json) gives it no condition to evaluate, so the "
        "validator checks that InvoiceId is null on every row"
    ),
}


def _package_home() -> str:
    """The folder holding the validator's package."""
    python = Path(VALIDATOR).with_name("python")
    found = subprocess.run(
        [str(python), "-c", "import focus_validator as f, os; print(os.path.dirname(f.__path__[0]))"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return found.stdout.strip()


def _outcomes(report) -> dict[str, tuple[str, str]]:
    """Each rule of the validator's JUnit report: (passed | failed | skipped, message)."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 (the validator's)
        rule = case.get("name", "").split(" :: ")[0]
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            if (found := case.find(kind)) is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                message = found.get("message", "")
        outcomes[rule] = (outcome, message)
    return outcomes


def _both_months(files: list[bytes], file_format: str) -> bytes:
    """The months' files as one: the validator spends about 4 s of CPU on a file whatever its
    rows (a DuckDB query a rule), and gives a rule the same outcome on the two months together
    as on each (136 passed, 441 skipped, InvoiceId-C-004-C failed, rule for rule)."""
    if file_format == "csv":
        first, *others = files
        return first + b"".join(rows.split(b"\n", 1)[1] for rows in others)
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(io.BytesIO(data)) for data in files]
    buffer = io.BytesIO()
    pq.write_table(pa.concat_tables(tables), buffer)  # the export's writer (exports.py)
    return buffer.getvalue()


# The validator's command line validates one file a process (about 2 s of CPU importing
# pandas, polars and DuckDB): this runs what it runs on each file named, in one process.
VALIDATE = """
import sys
from focus_validator.main import setup_logging
from focus_validator.validator import Validator

setup_logging()
for data in sys.argv[1:]:
    Validator(data_filename=data, output_destination=data + ".xml", output_type="unittest",
              rules_version="1.2", rules_block_remote_download=True,
              focus_dataset="CostAndUsage").validate()
"""


def test_focus_validator_passes_the_csv_and_parquet_exports(finance, october, tmp_path):
    from billing.services.credit_notes import credit_note_issue

    credit_note_issue(
        invoice=october["tenant-b"], reason="dispute", settle="balance", amount="150.00"
    )
    # It reads its currency codes at `focus_validator/rules/currency_codes.csv` relative to
    # where it runs, and writes its log there: it runs in tmp_path, its package linked in.
    (tmp_path / "focus_validator").symlink_to(Path(_package_home()) / "focus_validator")
    files = []
    for file_format in ("csv", "parquet"):
        exports = []
        for month in ("2026-10", "2026-12"):  # usage, purchase, draw; the credit note (now)
            response = finance.get(f"/api/v1/exports/focus?month={month}&format={file_format}")
            assert response.status_code == 200
            exports.append(response.content)
        data = tmp_path / f"focus.{file_format}"
        data.write_bytes(_both_months(exports, file_format))
        files.append(data)
    python = Path(VALIDATOR).with_name("python")
    run = subprocess.run(
        [str(python), "-c", VALIDATE, *map(str, files)],
        capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    for data in files:
        outcomes = _outcomes(f"{data}.xml")
        assert len(outcomes) > 100, (data.name, run.stdout[-2000:])  # the 1.2 rule set ran
        failed = {
            rule: message
            for rule, (outcome, message) in outcomes.items()
            if outcome == "failed" and rule not in NOT_APPLICABLE
        }
        assert not failed, (data.name, failed)
