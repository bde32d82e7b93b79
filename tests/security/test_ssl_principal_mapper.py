"""Kafka's SslPrincipalMapperTest, case for case, plus the rules' edges (no match, group
references, Java named groups, text Kafka's splitter would skip)."""

from __future__ import annotations

import pytest

from collector.security.ssl_principal_mapper import (
    InvalidMappingRule,
    NoMatchingRule,
    SslPrincipalMapper,
)

VALID_RULES = [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    # multi-line, comma separated (a YAML block scalar)
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n  DEFAULT\n",
]

INVALID_RULES = [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    # stricter than Kafka: its splitter skips the first rule silently
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/\nDEFAULT",
    # checked when loaded here, on every connection in Kafka
    "RULE:^CN=(.*)$/$x/",
    "RULE:^CN=(.*)$/a$/",
    "RULE:^CN=(.*)$/${who}/",
    "RULE:^CN=(\\p{L}*)$/$1/",
    "RULE:^CN=(.*$/$1/",
]


@pytest.mark.parametrize("rules", VALID_RULES)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", INVALID_RULES)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(InvalidMappingRule):
        SslPrincipalMapper(rules)


MAPPER_RULES = ", ".join(
    [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
)


@pytest.mark.parametrize(
    ("rules", "distinguished_name", "principal"),
    [
        (MAPPER_RULES, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
        (MAPPER_RULES, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        (MAPPER_RULES, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
        (MAPPER_RULES, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        (
            MAPPER_RULES,
            "OU=JavaSoft,O=Sun Microsystems,C=US",
            "OU=JavaSoft,O=Sun Microsystems,C=US",
        ),
        # testCommaWithWhitespace
        (
            "RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT",
            "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz",
            "Tkac\\, Adam",
        ),
        # the default list, and no rules at all is the default list's absence
        (None, "CN=a,O=b", "CN=a,O=b"),
        # first match wins
        ("RULE:^CN=(.*?),.*$/$1/, RULE:^CN=(.*?),O=(.*)$/$2/", "CN=a,O=b", "a"),
        # a reference past the groups is literal text (Kafka's escapeLiteralBackReferences)
        ("RULE:^CN=(.*?),O=(.*)$/$1@$3/", "CN=a,O=b", "a@$3"),
        ("RULE:^CN=(.*?),O=(.*)$/$21/", "CN=a,O=b", "b1"),
        ("RULE:^CN=(.*?),O=(.*)$/$0!/", "CN=a,O=b", "CN=a,O=b!"),
        # \/ is a literal slash in pattern and replacement
        ("RULE:^CN=(.*?)\\/(.*)$/$2\\/$1/", "CN=x/y", "y/x"),
        # Java's named groups
        ("RULE:^CN=(?<who>[^,]*).*$/${who}/U", "CN=svc,O=b", "SVC"),
        # Java's replaceAll replaces every match, not only the whole name
        ("RULE:(.*?)/x/", "ab", "xaxbx"),
    ],
)
def test_mapping(rules: str | None, distinguished_name: str, principal: str) -> None:
    assert SslPrincipalMapper(rules).name(distinguished_name) == principal


def test_no_rule_applies() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a,O=b"):
        mapper.name("CN=a,O=b")
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("").name("CN=a")


@pytest.mark.parametrize(
    ("listing", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        (
            "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]",
            "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/",
        ),
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
            "/DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
            "/DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(listing: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {listing})"
