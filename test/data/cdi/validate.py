#!/usr/bin/env python3
"""Validates CDI spec files against test/data/cdi/schema.json (python3-jsonschema, Draft 7).

Usage: validate.py SPEC.json... ; exit 0 when all are valid, 1 with each error (file, JSON path,
reason) on stderr otherwise, 2 on a usage or read error.
"""
import json
import os
import sys

import jsonschema


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    bad = 0
    for path in argv[1:]:
        try:
            with open(path) as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        for err in sorted(validator.iter_errors(spec), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in err.absolute_path) or "(document)"
            print(f"{path}: {where}: {err.message}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
