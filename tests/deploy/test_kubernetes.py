"""deploy/kubernetes/: every manifest valid against Kubernetes' own OpenAPI schemas (offline, the
ones kubernetes-validate bundles; strict: an unknown field is an error), and every name one
manifest refers to — Secret keys, ConfigMap keys, claims, the ServiceAccount, the image —
defined by another. No cluster runs here: what Kubernetes does with them is not tested."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
#: The minor releases Kubernetes supports at the time of writing.
VERSIONS = ("1.35.0", "1.36.0", "1.37.0")
IMAGE = "localhost/spark-consumer-offsets:latest"

Manifest = dict[str, Any]


def manifests() -> list[Manifest]:
    docs = [
        doc
        for path in sorted(MANIFESTS.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    ]
    assert docs, f"no manifests in {MANIFESTS}"
    return docs


def named(kind: str) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m for m in manifests() if m["kind"] == kind}


def executor_pod_template() -> Manifest:
    """Spark's executor pod template, a Pod kept in the job's ConfigMap."""
    data = named("ConfigMap")["consumer-offsets-config"]["data"]
    return dict(yaml.safe_load(data["executor-pod-template.yaml"]))


def pod_specs() -> Iterator[tuple[str, Manifest]]:
    for name, deployment in named("Deployment").items():
        yield name, deployment["spec"]["template"]["spec"]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_against_kubernetes_schemas(version: str) -> None:
    for manifest in [*manifests(), executor_pod_template()]:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_a_misspelt_field_fails_the_validation() -> None:
    deployment = copy.deepcopy(named("Deployment")["consumer-offsets-serve"])
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)


def test_every_reference_names_an_object_of_the_manifests() -> None:
    secrets, configs = named("Secret"), named("ConfigMap")
    claims, accounts = named("PersistentVolumeClaim"), named("ServiceAccount")
    for name, spec in pod_specs():
        assert spec.get("serviceAccountName", "default") in {*accounts, "default"}, name
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in configs, name
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, name
        for container in spec["containers"]:
            assert container["image"] == IMAGE, name
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]]["stringData"], (name, env)
    (binding,) = named("RoleBinding").values()
    assert binding["roleRef"]["name"] in named("Role")
    assert {s["name"] for s in binding["subjects"]} <= accounts.keys()


def test_spark_executors_use_the_image_the_template_the_claim_and_the_account() -> None:
    job = named("Deployment")["consumer-offsets-job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}) for e in container["env"]}
    args = env["PYSPARK_SUBMIT_ARGS"].split()
    assert args[-1] == "pyspark-shell"  # what pyspark's launcher expects last
    conf = dict(arg.split("=", 1) for arg in args if "=" in arg)
    assert conf["spark.kubernetes.container.image"] == IMAGE
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] in named(
        "ServiceAccount"
    )
    claim = "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint"
    assert conf[f"{claim}.options.claimName"] in named("PersistentVolumeClaim")
    mount = conf[f"{claim}.mount.path"]
    config_file = named("ConfigMap")["consumer-offsets-config"]["data"]["consumer-offsets.toml"]
    assert f'checkpoint_location = "{mount}/' in config_file
    template = conf["spark.kubernetes.executor.podTemplateFile"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert template == f"{mounts['config']}/executor-pod-template.yaml"
    # Executors call back their own driver, not a Service over both replicas.
    assert conf["spark.driver.host"] == "$(POD_IP)"
    assert fields["POD_IP"]["fieldPath"] == "status.podIP"
    names = [e["name"] for e in container["env"]]
    assert names.index("POD_IP") < names.index("PYSPARK_SUBMIT_ARGS")  # $(POD_IP) expands


def test_the_job_and_the_mirror_run_an_active_and_a_warm_standby() -> None:
    """Two replicas of each, all ``--standby`` (the lease picks the writer), replaced one at a
    time; their checkpoint a claim both pods mount."""
    claims = named("PersistentVolumeClaim")
    for name in ("consumer-offsets-job", "consumer-offsets-mirror"):
        deployment = named("Deployment")[name]
        assert deployment["spec"]["replicas"] == 2, name
        rolling = deployment["spec"]["strategy"]["rollingUpdate"]
        assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (0, 1), name
        spec = deployment["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert "--standby" in container["args"], name
        for volume in spec["volumes"]:
            if "persistentVolumeClaim" in volume:
                claim = claims[volume["persistentVolumeClaim"]["claimName"]]
                assert claim["spec"]["accessModes"] == ["ReadWriteMany"], name


def test_serve_is_scraped_where_it_listens() -> None:
    service = named("Service")["consumer-offsets-serve"]
    (container,) = named("Deployment")["consumer-offsets-serve"]["spec"]["template"]["spec"][
        "containers"
    ]
    port = container["ports"][0]["containerPort"]
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port)
    assert container["args"][container["args"].index("--port") + 1] == str(port)
    assert container["readinessProbe"]["httpGet"]["path"] == annotations["prometheus.io/path"]
