"""No password or token the SASL tests use appears in anything the test run logged or
printed (issue 13: secrets stay out of logs). Runs last in every session
(tests/secret_log_recorder.py orders it and records the session's output)."""

from __future__ import annotations

import logging

from tests.secret_log_recorder import LAST_TEST, RECORDING
from tests.secrets_under_test import all_secrets


def test_no_secret_appears_in_anything_the_suite_logged() -> None:
    assert LAST_TEST == "test_no_secret_appears_in_anything_the_suite_logged"
    # The recorder is wired: a record through a project logger reaches the file.
    logging.getLogger("collector.secrets_check").info("recorder canary 5b0e")
    recorded = RECORDING.text()
    assert "collector.secrets_check INFO recorder canary 5b0e" in recorded
    # Counted, never listed: the failure message must not print them either.
    leaked = sum(secret in recorded for secret in all_secrets())
    assert leaked == 0, (
        f"{leaked} secret(s) of tests/secrets_under_test.py appear in the captured logs "
        f"({RECORDING.path}, {RECORDING.records} log records)"
    )
