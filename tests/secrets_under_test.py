"""Every password and token the SASL tests hand to clients or store as credentials.

The SASL tests import their secrets from here, so that the suite-wide check
(tests/test_zz_no_secrets_in_logs.py, with the recorder in tests/conftest.py) can look for
each of them in everything the test run logged and printed: none may appear there.
Each one is distinctive enough that a hit is a leak, not a coincidence.
"""

from __future__ import annotations

# SASL/PLAIN and SASL/SCRAM users of tests/integration/test_sasl_ssl_real_clients.py and
# test_sasl_quotas.py: name -> password.
SASL_USERS: dict[str, str] = {
    "alice": "alice-Pw-7f3c19e2",
    "bob": "bob-Pw-52a8d0c4",
    "carol": "carol-Pw-e91b6f07",
    "fast": "fast-Pw-3d7ea150",
    "slow": "slow-Pw-84c2f9ab",
}

# A password that is never right (the refused logins).
WRONG_PASSWORD = "wrong-Pw-0c6d2e95"

# The password tests/integration/test_java_scram_admin.py sets over the wire
# (AlterUserScramCredentials) and with `ktc users`, then logs in with.
SCRAM_ADMIN_PASSWORD = "java-scram-secret-5d1e"


def all_secrets() -> list[str]:
    """What the suite-wide check looks for."""
    return [*SASL_USERS.values(), WRONG_PASSWORD, SCRAM_ADMIN_PASSWORD]
