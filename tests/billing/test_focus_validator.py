"""The FOCUS export as the FinOps Foundation's validator reads it: `focus-validator` (FOCUS 1.2
rules, their own copy: no download) passes the CSV and the Parquet files of a month with
usage, a prepaid purchase and its draw, and of a month with a credit note. The validator
needs Python >= 3.12: it runs from the test-only environment scripts/focus-validator.sh
installs, named by FOCUS_VALIDATOR (`make test` sets it)."""

from __future__ import annotations

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


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_focus_validator_passes_the_csv_and_parquet_exports(
    file_format,
    finance,
    october,
    tmp_path,
):
    from billing.services.credit_notes import credit_note_issue

    credit_note_issue(
        invoice=october["tenant-b"], reason="dispute", settle="balance", amount="150.00"
    )
    # It reads its currency codes at `focus_validator/rules/currency_codes.csv` relative to
    # where it runs, and writes its log there: it runs in tmp_path, its package linked in.
    (tmp_path / "focus_validator").symlink_to(Path(_package_home()) / "focus_validator")
    for month in ("2026-10", "2026-12"):  # usage, purchase, draw; the credit note (issued now)
        response = finance.get(f"/api/v1/exports/focus?month={month}&format={file_format}")
        assert response.status_code == 200
        data = tmp_path / f"focus-{month}.{file_format}"
        data.write_bytes(response.content)
        report = tmp_path / f"report-{month}-{file_format}.xml"
        run = subprocess.run(
            [VALIDATOR, "--data-file", str(data), "--validate-version", "1.2",
             "--block-download", "--output-type", "unittest",
             "--output-destination", str(report)],
            capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        outcomes = _outcomes(report)
        assert len(outcomes) > 100, (month, run.stdout[-2000:])  # the 1.2 rule set ran
        failed = {
            rule: message
            for rule, (outcome, message) in outcomes.items()
            if outcome == "failed" and rule not in NOT_APPLICABLE
        }
        assert not failed, (month, file_format, failed)
