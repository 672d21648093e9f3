#!/usr/bin/env python3
"""Vendors the schemas of the custom resources that examples/kubernetes/k8s uses (JobSet, PyTorchJob,
MPIJob) from the operators' own CRDs, small enough to keep in the repository:

    python tools/k8s_crd_schemas.py OUT_DIR CRD_FILE[@SOURCE] ...

Each CRD's openAPIV3Schema is kept whole except its embedded Pod and Job templates (a field
`template` with metadata and spec), which become "any object" here: the tests validate those
against the Kubernetes API schemas themselves (kubernetes-validate), as a Pod template or a Job.
SOURCE (repository@commit:path) is recorded in the output's "source" key.
"""
import json
import sys
from pathlib import Path

import yaml

ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
       "description": "an embedded Pod or Job template: validated against the Kubernetes API schemas"}


def trimmed(schema):
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "properties":
                out[k] = {name: ANY if name == "template" and _is_template(s) else trimmed(s) for name, s in v.items()}
            elif k != "description":
                out[k] = trimmed(v)
        return out
    if isinstance(schema, list):
        return [trimmed(x) for x in schema]
    return schema


def _is_template(s):
    return isinstance(s, dict) and {"metadata", "spec"} <= set(s.get("properties") or {})


def main(out_dir, *crds):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for arg in crds:
        path, _, source = arg.partition("@")
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if not version.get("served"):
                    continue
                kind = spec["names"]["kind"]
                out = {"source": source or path, "group": spec["group"], "version": version["name"], "kind": kind,
                       "schema": trimmed(version["schema"]["openAPIV3Schema"])}
                name = f"{kind.lower()}-{spec['group']}-{version['name']}.json"
                (out_dir / name).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
                print(name, (out_dir / name).stat().st_size)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
