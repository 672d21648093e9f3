"""Every manifest in examples/kubernetes/k8s and the rendered Helm chart validate offline against the
Kubernetes API schemas (kubernetes-validate, strict: an unknown field is refused) and, for
JobSet, PyTorchJob and MPIJob, against the operators' own CRD schemas (examples/kubernetes/schemas,
vendored by tools/k8s_crd_schemas.py; their embedded Pod and Job templates are checked as
Kubernetes objects). The chart is rendered by Helm's own engine (helm-python-sdk: Helm's Go
SDK behind a C ABI; no helm binary is packaged on PyPI or Debian). No cluster is involved."""
import copy
import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from helm_python import chart as helm_chart

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "examples" / "kubernetes" / "k8s"
CHART = ROOT / "examples" / "kubernetes" / "helm" / "comm-bench"
KUBE_VERSION = "1.30.0"       # the oldest version the manifests promise (batch controller-uid label: 1.27)
MANIFESTS = sorted(K8S.glob("*.yaml"))


def crd_schemas():
    out = {}
    for f in (ROOT / "examples" / "kubernetes" / "schemas").glob("*.json"):
        s = json.loads(f.read_text())
        out[(f"{s['group']}/{s['version']}", s["kind"])] = strict(s["schema"])
    return out


def strict(schema):
    """Unknown fields refused where the CRD lists its fields (the API server would prune them)."""
    if isinstance(schema, list):
        return [strict(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


CRDS = crd_schemas()


def templates(obj, path=""):
    """(path, kind, object) of each embedded template: a Job template (JobSet) or a Pod template."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            here = f"{path}.{k}"
            if k == "template" and isinstance(v, dict) and "spec" in v:
                if "template" in (v.get("spec") or {}):       # a Job template: its pod template inside
                    yield here, "Job", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t"},
                                        "spec": v["spec"]}
                else:
                    yield here, "PodTemplate", {"apiVersion": "v1", "kind": "PodTemplate",
                                                "metadata": {"name": "t"}, "template": v}
            else:
                yield from templates(v, here)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from templates(v, f"{path}[{i}]")


def validate(doc):
    """Raises on the first schema error; returns what validated it."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CRDS:
        jsonschema.validate(doc, CRDS[key])
        inner = list(templates(doc.get("spec")))
        assert inner, f"{key}: no Pod or Job template found"
        for where, _, obj in inner:
            try:
                kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                raise AssertionError(f"{key[1]} spec{where}: {exc.message}") from None
        return "crd"
    kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    return "kubernetes"


def docs_of(text):
    return [d for d in yaml.safe_load_all(text) if d]


def test_the_crd_schemas_are_vendored_with_their_sources():
    assert set(CRDS) == {("jobset.x-k8s.io/v1alpha2", "JobSet"), ("kubeflow.org/v1", "PyTorchJob"),
                         ("kubeflow.org/v2beta1", "MPIJob")}
    for f in (ROOT / "examples" / "kubernetes" / "schemas").glob("*.json"):
        assert "@" in json.loads(f.read_text())["source"]      # repository@commit:path


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates(path):
    kinds = [(d["kind"], validate(d)) for d in docs_of(path.read_text())]
    assert kinds


def test_every_launcher_has_a_manifest():
    kinds = {d["kind"] for p in MANIFESTS for d in docs_of(p.read_text())}
    assert {"Job", "Service", "JobSet", "PyTorchJob", "MPIJob", "DaemonSet", "PersistentVolumeClaim"} <= kinds


@pytest.mark.parametrize("name,mutate,where", [
    ("indexed-job.yaml", lambda d: d[1]["spec"]["template"]["spec"].update(subdomian="x"), "subdomian"),
    ("indexed-job.yaml", lambda d: d[1]["spec"].update(completions="four"), "four"),
    ("jobset.yaml", lambda d: d[0]["spec"].update(replicatedJob=[]), "replicatedJob"),
    ("jobset.yaml", lambda d: d[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
     ["containers"][0].update(imagee="x"), "imagee"),
    ("pytorchjob.yaml", lambda d: d[0]["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas="3"), "'3'"),
    ("mpijob.yaml", lambda d: d[0]["spec"].update(slotsPerWorkers=1), "slotsPerWorkers"),
    ("mpijob.yaml", lambda d: d[0]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"].update(
        containers=[{"image": "x"}]), "name"),
])
def test_a_broken_manifest_is_refused(name, mutate, where):
    """The checks are real: a misspelt or mistyped field fails, in a core object, a CRD's own
    fields and a CRD's embedded template alike."""
    docs = docs_of((K8S / name).read_text())
    broken = copy.deepcopy(docs)
    mutate(broken)
    bad = [b for d, b in zip(docs, broken) if d != b]
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError, AssertionError),
                       match=where):
        validate(bad[0])


def render(values, name="r1"):
    out = helm_chart.Chart.load(CHART).render(values, name=name, namespace="default")
    return [d for text in out.values() for d in docs_of(text)]


VALUE_SETS = [
    {},
    {"nodes": 16, "gpusPerNode": 8, "transport": "nccl", "pattern": "ring", "output": {"pvc": "comm-bench-results"},
     "sizes": {"min": "8", "max": "2G", "factor": 2}, "resources": {"rdma/ib": 1},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
     "nodeSelector": {"nvidia.com/gpu.present": "true"}},
    {"nodes": 4, "gpusPerNode": 1, "transport": "rdma", "extraArgs": "--op all"},
]


@pytest.mark.parametrize("values", VALUE_SETS, ids=["defaults", "gpus", "one-gpu"])
def test_the_chart_renders_and_validates(values):
    docs = render(values)
    assert sorted(d["kind"] for d in docs) == ["Job", "Service"]
    for d in docs:
        validate(d)
    job = next(d for d in docs if d["kind"] == "Job")
    svc = next(d for d in docs if d["kind"] == "Service")
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}
    nodes, gpus = values.get("nodes", 2), values.get("gpusPerNode", 0)
    # what comm-bench's detection reads: an Indexed Job under a headless Service, WORLD_SIZE = pods
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == nodes
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    assert env["WORLD_SIZE"] == str(nodes) and env["CB_GPUS_PER_POD"] == str(max(gpus, 1))
    assert env["CB_TRANSPORT"] == values.get("transport", "tcp")
    assert ("MASTER_ADDR" in env) == (gpus > 1)      # torchrun needs it; one rank a pod finds it by DNS
    limits = pod["containers"][0].get("resources", {}).get("limits", {})
    assert limits.get("nvidia.com/gpu") == (gpus or None)
    volume = pod["volumes"][0]
    assert ("persistentVolumeClaim" in volume) == bool(values.get("output", {}).get("pvc"))
    assert env["CB_STDOUT"] == ("0" if values.get("output", {}).get("pvc") else "1")


def test_a_bad_value_fails_validation():
    """A value that renders into a wrong type (a node label value must be a string) is caught."""
    with pytest.raises(kubernetes_validate.ValidationError, match="nodeSelector"):
        for d in render({"nodeSelector": {"gpu": 1}}):
            validate(d)


def test_the_npd_plugin_config_names_its_script():
    cm = next(d for d in docs_of((K8S / "npd-daemonset.yaml").read_text()) if d["kind"] == "ConfigMap")
    monitor = json.loads(cm["data"]["comm-bench-monitor.json"])
    assert monitor["plugin"] == "custom"
    [rule] = monitor["rules"]
    assert rule["path"] == "/config/comm-bench-verdict.sh" and "comm-bench-verdict.sh" in cm["data"]
    assert "--node-problem" in cm["data"]["sidecar.sh"]
