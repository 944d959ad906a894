"""Validates the custom resources of a YAML stream (standard input) against
the CRD schemas vendored beside this file (README.md says where they come
from), as an API server with strict field validation would take them:
the CRD's openAPIV3Schema, with unknown fields refused (every object
schema that lists properties and does not preserve unknown fields gets
additionalProperties: false) and metadata.name a DNS subdomain.

Prints one line per document, "valid KIND NAME", "invalid KIND NAME: PATH:
MESSAGE" (one per error) or "other KIND NAME" for a kind without a
vendored schema (Kubernetes' own kinds: kubernetes-validate checks those),
and exits 1 if any document is invalid.

What it cannot check, as a real API server would: the CRDs' CEL rules
(x-kubernetes-validations), list-map key uniqueness, ObjectMeta beyond
the name, and anything a controller or webhook decides.

Run by tests/tests/deploy.rs with the deployment tools' Python (jsonschema
and PyYAML, pinned in scripts/test).
"""

import json
import os
import re
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

# (apiVersion, kind) -> vendored schema file.
SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring.coreos.com-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring.coreos.com-v1.json",
    ("cert-manager.io/v1", "Certificate"): "certificate-cert-manager.io-v1.json",
    ("cert-manager.io/v1", "Issuer"): "issuer-cert-manager.io-v1.json",
}

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def strict(schema):
    """The schema with unknown fields refused wherever the API server
    would prune or (strict field validation) refuse them."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            out.get("type") == "object"
            and "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return strict(json.load(f))


def main():
    validators = {}
    bad = False
    for doc in yaml.safe_load_all(sys.stdin):
        if doc is None:
            continue
        kind = doc.get("kind", "?")
        name = (doc.get("metadata") or {}).get("name", "?")
        key = (doc.get("apiVersion"), kind)
        if key not in SCHEMAS:
            print(f"other {kind} {name}")
            continue
        if key not in validators:
            validators[key] = jsonschema.Draft7Validator(load(SCHEMAS[key]))
        errors = [
            f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in validators[key].iter_errors(doc)
        ]
        if not (isinstance(name, str) and len(name) <= 253 and DNS_SUBDOMAIN.match(name)):
            errors.append(f"metadata.name: {name!r} is not a DNS subdomain")
        if errors:
            bad = True
            for e in errors:
                print(f"invalid {kind} {name}: {e}")
        else:
            print(f"valid {kind} {name}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
