"""Match patterns: RE2's dialect where it differs from Java's, linear-time matching on
client-controlled values, and Java's answers (the JDK itself) on the syntax both share."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest

from proto.errors import Errors, KafkaError
from subscriptions.match_pattern import MatchPattern, MatchPatternError
from subscriptions.matching import ClientMetadata, matches
from subscriptions.model import Subscription

ORACLE_SOURCE = Path(__file__).with_name("RegexOracle.java")

# Patterns in the syntax java.util.regex and RE2 share (commas included: MatchPattern
# itself takes them, only the `match` list splits at them).
SHARED_PATTERNS = [
    "app-1",
    "app-.*",
    "app-\\d+",
    "app-[0-9]{1,3}",
    "(producer|consumer)-\\d+",
    "[a-z]+",
    "[^-]+",
    "[A-Za-z0-9._-]*",
    "(?i)LIBRDKAFKA",
    "(?i)confluent-kafka-.*",
    "librdkafka|confluent-kafka-python",
    "2\\.1[0-9]\\..*",
    "3\\.7\\..*",
    "10\\.0\\.0\\.\\d+",
    "0:0:0:0:0:0:0:1",
    ".*:.*",
    "\\w+",
    "\\w+-\\w+",
    "\\d*",
    ".",
    ".+",
    "a?",
    "a*b*",
    "(ab)+",
    "^app.*$",
    "\\p{L}+",
    "\\pL+",
    "\\p{Lu}\\p{Ll}+",
    "\\Qa.b\\E",
    "app\\z",
    "(?<name>app)-1",
    "h.llo",
    "héllo",
    "😀",
    ".😀.?",
    "",
]
VALUES = [
    "app-1",
    "app-12",
    "app-1234",
    "App-1",
    "producer-7",
    "consumer-",
    "librdkafka",
    "LibRdKafka",
    "confluent-kafka-python",
    "2.16.0",
    "3.7.1",
    "10.0.0.1",
    "0:0:0:0:0:0:0:1",
    "",
    "a",
    "ab",
    "abab",
    "aab",
    "a.b",
    "axb",
    "héllo",
    "hello",
    "Ölung",
    "😀",
    "x😀",
    "a b",
    "tab\tname",
    "line\nbreak",
    "app",
    "app\n",
]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture(scope="module")
def java_answers(tmp_path_factory: pytest.TempPathFactory) -> list[bool]:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.fail("the JDK ground-truth test needs `javac` and `java` on PATH")
    workdir = tmp_path_factory.mktemp("regex-oracle")
    shutil.copy(ORACLE_SOURCE, workdir)
    subprocess.run([javac, ORACLE_SOURCE.name], cwd=workdir, check=True, timeout=120)
    lines = "".join(f"{_b64(p)}\t{_b64(v)}\n" for p in SHARED_PATTERNS for v in VALUES)
    completed = subprocess.run(
        [java, "-cp", str(workdir), "RegexOracle"],
        input=lines,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [line == "1" for line in completed.stdout.splitlines()]


def test_full_matches_agree_with_java_on_the_shared_syntax(
    java_answers: list[bool],
) -> None:
    ours = [MatchPattern(p).fullmatches(v) for p in SHARED_PATTERNS for v in VALUES]
    assert len(java_answers) == len(ours)
    disagreements = [
        (p, v, java)
        for (p, v), java, mine in zip(
            ((p, v) for p in SHARED_PATTERNS for v in VALUES),
            java_answers,
            ours,
            strict=True,
        )
        if java != mine
    ]
    assert disagreements == []
    assert sum(java_answers) > 60  # the corpus exercises matches, not only misses


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern", ["(a+)+b", "(a|a)*b", "(a*)*b", "(.*a){12}b"])
def test_catastrophic_patterns_match_a_huge_client_id_in_linear_time(
    pattern: str,
) -> None:
    """A backtracking engine (java.util.regex, Python's re) takes exponential time on
    these with a run of a's and no b; a client id may be 32,767 characters long."""
    subscription = Subscription.from_configs(
        "careless", {"match": f"client_id={pattern}"}
    )
    for length in (30, 1000, 32_767):
        metadata = ClientMetadata(client_instance_id="x", client_id="a" * length)
        assert matches(subscription, metadata) is False
    assert matches(subscription, ClientMetadata("x", "a" * 100 + "b")) is True


@pytest.mark.parametrize(
    "pattern",
    [
        "(?=app)app-1",  # lookahead
        "(?!x)app-1",  # negative lookahead
        "(?<=a)pp",  # lookbehind
        "(a)\\1",  # backreference
        "a*+",  # possessive quantifier
        "(?>app)",  # atomic group
        "\\p{Alpha}+",  # Java's POSIX-named class
        "(a{1000}){1000}",  # too large to compile within RE2's memory bound
        "(",
        "*a",
    ],
)
def test_patterns_re2_refuses_are_invalid_config_with_kafkas_message(
    pattern: str,
) -> None:
    with pytest.raises(MatchPatternError):
        MatchPattern(pattern)
    with pytest.raises(KafkaError) as raised:
        Subscription.from_configs("s", {"match": f"client_id={pattern}"})
    assert raised.value.error_code == Errors.INVALID_CONFIG
    assert str(raised.value) == f"Illegal client matching pattern: client_id={pattern}"


def test_results_are_remembered_per_value_and_stay_correct() -> None:
    pattern = MatchPattern("app-\\d+")
    assert [pattern.fullmatches(v) for v in ("app-1", "app-x", "app-1", "app-x")] == [
        True,
        False,
        True,
        False,
    ]
    info = pattern.fullmatches.cache_info()
    assert (info.hits, info.misses) == (2, 2)


def test_a_lone_surrogate_never_matches() -> None:
    assert MatchPattern(".*").fullmatches("a\ud800") is False
    assert MatchPattern(".*").fullmatches("a") is True
