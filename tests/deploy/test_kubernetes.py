"""deploy/kubernetes/: every manifest valid against Kubernetes' own OpenAPI schemas (offline, the
ones kubernetes-validate bundles; strict: an unknown field is an error), every name one
manifest refers to — Secret keys, ConfigMap keys, claims, the ServiceAccount, the image —
defined by another in the same namespace, every path a container names mounted or in the image
(as deploy/container/Containerfile reads), every port a probe, Service or NetworkPolicy names
declared by its pods, and every pod (the executor pod template too) as a
platform team admits it: Pod Security "restricted", a read-only root, secrets as files, a
NetworkPolicy of its own. No cluster runs here: what Kubernetes does with them is not tested."""

from __future__ import annotations

import copy
import functools
import json
import re
import sysconfig
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import kubernetes_validate
import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
#: The minor releases Kubernetes supports at the time of writing.
VERSIONS = ("1.35.0", "1.36.0", "1.37.0")
IMAGE = "registry.example/spark-consumer-offsets:0.1.0"
#: Where Spark's executors run: the job's namespace, apart from serve's and the mirror's.
SPARK_NAMESPACE = "consumer-offsets-spark"

Manifest = dict[str, Any]


def manifests() -> list[Manifest]:
    """Every object of the manifests, in file order (a fresh copy: tests may change it)."""
    return copy.deepcopy(_parsed(MANIFESTS))


@functools.cache  # parsed once: every test reads them
def _parsed(folder: Path) -> list[Manifest]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = [
        doc
        for path in sorted(folder.glob("*.yaml"))
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader)
    ]
    assert docs, f"no manifests in {folder}"
    return docs


def named(kind: str) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m for m in manifests() if m["kind"] == kind}


def executor_pod_template() -> Manifest:
    """Spark's executor pod template, a Pod kept in the job's ConfigMap."""
    data = named("ConfigMap")["consumer-offsets-config"]["data"]
    return dict(yaml.safe_load(data["executor-pod-template.yaml"]))


class Pod(NamedTuple):
    """A pod the manifests make run: a Deployment's template, or Spark's executor template."""

    name: str
    namespace: str
    labels: dict[str, str]
    spec: Manifest


def pods() -> Iterator[Pod]:
    for name, deployment in named("Deployment").items():
        template = deployment["spec"]["template"]
        namespace = deployment["metadata"].get("namespace", "default")
        yield Pod(name, namespace, template["metadata"]["labels"], template["spec"])
    executor = executor_pod_template()
    yield Pod("executor", SPARK_NAMESPACE, executor["metadata"]["labels"], executor["spec"])


def pod_specs() -> Iterator[tuple[str, Manifest]]:
    for pod in pods():
        yield pod.name, pod.spec


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_against_kubernetes_schemas(version: str) -> None:
    for manifest in [*manifests(), executor_pod_template()]:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_a_misspelt_field_fails_the_validation() -> None:
    deployment = copy.deepcopy(named("Deployment")["consumer-offsets-serve"])
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)


def namespace_of(manifest: Manifest) -> str:
    return str(manifest["metadata"].get("namespace", "default"))


def test_every_reference_names_an_object_of_the_manifests() -> None:
    """Each Secret, ConfigMap, claim and account a pod names exists in the pod's namespace,
    with the keys it mounts; each ``*_FILE`` variable names a file a Secret volume holds."""
    secrets, configs = named("Secret"), named("ConfigMap")
    claims, accounts = named("PersistentVolumeClaim"), named("ServiceAccount")
    namespaces = named("Namespace")

    def defined(objects: dict[str, Manifest], name: str, pod: Pod) -> Manifest:
        assert name in objects, (pod.name, name)
        assert namespace_of(objects[name]) == pod.namespace, (pod.name, name)
        return objects[name]

    for pod in pods():
        assert pod.namespace in namespaces, pod.name
        account = pod.spec.get("serviceAccountName")
        if account:
            defined(accounts, account, pod)
        files: set[str] = set()
        mounts = {
            m["name"]: m["mountPath"] for c in pod.spec["containers"] for m in c["volumeMounts"]
        }
        for volume in pod.spec.get("volumes", []):
            if "configMap" in volume:
                defined(configs, volume["configMap"]["name"], pod)
            if "persistentVolumeClaim" in volume:
                defined(claims, volume["persistentVolumeClaim"]["claimName"], pod)
            if "secret" in volume:
                secret = defined(secrets, volume["secret"]["secretName"], pod)
                items = volume["secret"].get("items")
                keys = [i["key"] for i in items] if items else list(secret["stringData"])
                assert set(keys) <= secret["stringData"].keys(), (pod.name, volume)
                files |= {f"{mounts[volume['name']]}/{key}" for key in keys}
        for container in pod.spec["containers"]:
            assert container.get("image", IMAGE) == IMAGE, pod.name
            for env in container.get("env", []):
                if env["name"].endswith("_FILE"):
                    assert env["value"] in files, (pod.name, env)
    (binding,) = named("RoleBinding").values()
    assert binding["roleRef"]["name"] in named("Role")
    assert {s["name"] for s in binding["subjects"]} <= accounts.keys()
    assert {s["namespace"] for s in binding["subjects"]} == {namespace_of(binding)}


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


def test_serve_is_scraped_where_it_listens_and_probed_whatever_tls_and_users_ask() -> None:
    """Prometheus' annotations name the port serve's configuration listens on, over HTTPS
    (its web config is mounted); the probes open that port and send no request, so neither
    TLS nor a password can fail them, and they reveal nothing."""
    service = named("Service")["consumer-offsets-serve"]
    (container,) = named("Deployment")["consumer-offsets-serve"]["spec"]["template"]["spec"][
        "containers"
    ]
    (port,) = container["ports"]
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port["containerPort"])
    assert annotations["prometheus.io/scheme"] == "https"
    config = named("ConfigMap")["consumer-offsets-serve-config"]["data"]["consumer-offsets.toml"]
    serve = tomllib.loads(config)["serve"]
    assert serve["port"] == port["containerPort"]
    web_config = Path(serve["web_config_file"])
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    (volume,) = (
        v
        for v in named("Deployment")["consumer-offsets-serve"]["spec"]["template"]["spec"][
            "volumes"
        ]
        if v["name"] == mounts[str(web_config.parent)]
    )
    secret = named("Secret")[volume["secret"]["secretName"]]["stringData"]
    web = yaml.safe_load(secret[web_config.name])
    assert web["basic_auth_users"] and web["tls_server_config"]["cert_file"] in secret
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["tcpSocket"]["port"] == port["name"], probe


def containers(pod: Pod) -> list[Manifest]:
    return [*pod.spec.get("initContainers", []), *pod.spec["containers"]]


def test_every_pod_meets_pod_security_restricted_with_a_read_only_root() -> None:
    """Pod Security Standards "restricted", field by field, for every pod the manifests run
    (Spark's executor template too), in namespaces that enforce it; every container's root
    read-only, writing only to volumes."""
    namespaces = named("Namespace")
    for pod in pods():
        labels = namespaces[pod.namespace]["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted", pod.namespace
        context = pod.spec.get("securityContext", {})
        assert context.get("runAsNonRoot") is True, pod.name
        assert context.get("seccompProfile", {}).get("type") == "RuntimeDefault", pod.name
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            assert not pod.spec.get(key), (pod.name, key)
        for volume in pod.spec.get("volumes", []):
            assert "hostPath" not in volume, (pod.name, volume)
        for container in containers(pod):
            where = (pod.name, container["name"])
            own = container.get("securityContext", {})
            assert own.get("allowPrivilegeEscalation") is False, where
            assert own.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not own.get("capabilities", {}).get("add"), where
            assert own.get("privileged") is not True, where
            assert own.get("runAsNonRoot", context.get("runAsNonRoot")) is True, where
            assert own.get("runAsUser", context.get("runAsUser")) != 0, where
            seccomp = own.get("seccompProfile", context.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", where
            assert own.get("readOnlyRootFilesystem") is True, where
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, where  # Spark's local dirs, the JVM's and Python's files


def test_no_secret_reaches_a_container_as_an_environment_variable() -> None:
    for pod in pods():
        for container in containers(pod):
            for env in container.get("env", []):
                assert "secretKeyRef" not in env.get("valueFrom", {}), (pod.name, env["name"])
            for source in container.get("envFrom", []):
                assert "secretRef" not in source, (pod.name, source)


def selects(selector: Manifest, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # matchExpressions: not used here
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_every_pod_has_a_network_policy_of_its_own_behind_a_default_deny() -> None:
    """Each namespace denies all traffic unless allowed; each pod is selected by a policy
    that names it (not only the namespace-wide ones), for both directions."""
    policies = [p for p in manifests() if p["kind"] == "NetworkPolicy"]
    for pod in pods():
        here = [p for p in policies if namespace_of(p) == pod.namespace]
        assert any(
            p["spec"]["podSelector"] == {}
            and sorted(p["spec"]["policyTypes"]) == ["Egress", "Ingress"]
            and not p["spec"].get("ingress")
            and not p["spec"].get("egress")
            for p in here
        ), pod.namespace
        own = [
            p
            for p in here
            if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"], pod.labels)
        ]
        assert own, pod.name
        assert {"Ingress", "Egress"} <= {t for p in own for t in p["spec"]["policyTypes"]}


def test_only_the_driver_holds_a_token_and_its_role_touches_pods_alone() -> None:
    """The driver's Role: what Spark's client-mode driver does to its executor pods, nothing
    else (no ConfigMaps, Services, claims or Secrets, no wildcards); every other pod runs
    without a service-account token."""
    (role,) = named("Role").values()
    (rule,) = role["rules"]
    assert rule["apiGroups"] == [""] and rule["resources"] == ["pods"]
    assert set(rule["verbs"]) <= {"create", "get", "list", "watch", "delete", "deletecollection"}
    assert not named("ClusterRole") and not named("ClusterRoleBinding")
    for pod in pods():
        if pod.name == "consumer-offsets-job":
            assert pod.namespace == SPARK_NAMESPACE
            continue
        assert pod.spec.get("automountServiceAccountToken") is False, pod.name
    job = named("Deployment")["consumer-offsets-job"]["spec"]["template"]["spec"]
    (container,) = job["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    args = env["PYSPARK_SUBMIT_ARGS"].split()
    conf = dict(arg.split("=", 1) for arg in args if "=" in arg)
    # What would need ConfigMaps, Services or claims in the Role, off.
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"
    assert conf["spark.kubernetes.driver.service.deleteOnTermination"] == "false"
    assert conf["spark.kubernetes.driver.ownPersistentVolumeClaim"] == "false"


def test_spark_authenticates_and_encrypts_and_shows_no_ui() -> None:
    """Spark's own security on between the driver and its executors, the secret a file both
    mount at the same path (so it is not put into the executors' pod spec); no UI."""
    job = named("Deployment")["consumer-offsets-job"]["spec"]["template"]["spec"]
    (container,) = job["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    conf = dict(a.split("=", 1) for a in env["PYSPARK_SUBMIT_ARGS"].split() if "=" in a)
    for key in ("authenticate", "network.crypto.enabled", "io.encryption.enabled"):
        assert conf[f"spark.{key}"] == "true", key
    assert conf["spark.ui.enabled"] == "false"
    secret_file = Path(conf["spark.authenticate.secret.file"])
    for pod in pods():
        if pod.namespace != SPARK_NAMESPACE:
            continue
        (spark,) = pod.spec["containers"]
        mounts = {m["mountPath"]: m["name"] for m in spark["volumeMounts"]}
        volumes = {v["name"]: v for v in pod.spec["volumes"]}
        volume = volumes[mounts[str(secret_file.parent)]]
        assert volume["secret"]["secretName"] == "consumer-offsets-spark-auth", pod.name
    mirror = named("Deployment")["consumer-offsets-mirror"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in mirror["containers"][0]["env"]}
    assert "--conf spark.ui.enabled=false" in env["PYSPARK_SUBMIT_ARGS"]


def test_liveness_never_asks_the_sink() -> None:
    """A PostgreSQL outage must not restart the job's and the mirror's pods (they wait it
    out): their liveness and start-up probes check the Spark JVM, never the health check that
    reads the sink's heartbeat; readiness may."""
    for name in ("consumer-offsets-job", "consumer-offsets-mirror"):
        spec = named("Deployment")[name]["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        for probe in ("startupProbe", "livenessProbe"):
            command = container[probe].get("exec", {}).get("command", [])
            assert not any("healthcheck" in part for part in command), (name, probe)
        assert "healthcheck" in " ".join(container["readinessProbe"]["exec"]["command"])


def test_each_pod_has_a_disruption_budget_that_keeps_one() -> None:
    budgets = [m for m in manifests() if m["kind"] == "PodDisruptionBudget"]
    for name in ("consumer-offsets-job", "consumer-offsets-mirror"):
        deployment = named("Deployment")[name]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        (budget,) = [
            b
            for b in budgets
            if namespace_of(b) == namespace_of(deployment)
            and selects(b["spec"]["selector"], labels)
        ]
        assert budget["spec"].get("maxUnavailable") == 1 or budget["spec"].get("minAvailable") == 1


CONTAINERFILE = MANIFESTS.parent / "container" / "Containerfile"
#: Debian's Python by release: the image's venv is made by the base's python3.
DEBIAN_PYTHON = {"bookworm": "3.11", "trixie": "3.13"}
#: A path in a command, an environment value, a Spark setting or a mounted TOML (URLs removed).
PATH_PATTERN = re.compile(r"(?<![\w.$/])/[\w.@+-]+(?:/[\w.@*+-]*)*")
URL_PATTERN = re.compile(r"\w+://\S+")


class ImageLayout(NamedTuple):
    """What deploy/container/Containerfile puts into its image, as far as reading it tells."""

    #: Paths the final stage makes: its COPY destinations (a file, or a folder copied from
    #: the build stage), WORKDIR and VOLUME.
    files: set[str]
    folders: set[str]
    #: The build stage's venv (copied whole) and the folders it fills (COPY DEST/).
    venv: str
    filled: set[str]
    python: str
    text: str


@functools.cache
def image_layout() -> ImageLayout:
    text = CONTAINERFILE.read_text(encoding="utf-8")
    base = re.search(r"ARG BASE_IMAGE=\S+:(\w+)", text)
    assert base and base.group(1).split("-")[0] in DEBIAN_PYTHON, "the base's Debian release"
    *_, build, final = re.split(r"^FROM ", text, flags=re.MULTILINE)
    files, folders = set(), set()
    for source, destination in re.findall(r"^COPY (--from=\w+ \S+|\S+) (\S+)", final, re.M):
        (folders if source.startswith("--from=") else files).add(destination.rstrip("/"))
    folders |= set(re.findall(r"^(?:WORKDIR|VOLUME) (\S+)", final, re.MULTILINE))
    venv = re.search(r"python3 -m venv (\S+?);", build)
    assert venv, "the build stage's venv"
    filled = {d.rstrip("/") for d in re.findall(r"^COPY \S+/ (\S+)", build, re.MULTILINE)}
    return ImageLayout(
        files, folders, venv.group(1), filled, DEBIAN_PYTHON[base.group(1).split("-")[0]], text
    )


def in_image(path: str) -> bool:
    """``path`` is in the image: a file it copies, a folder it makes, inside the venv a
    package of the lock installed there (found in this test's own environment, which the
    same lock installed), or a folder the build stage fills that the Containerfile names."""
    layout = image_layout()
    path = path.rstrip("*").rstrip("/")
    if path in layout.files or path in layout.folders:
        return True
    folder = next((f for f in layout.folders if path.startswith(f + "/")), None)
    if folder is None:
        return False
    site = f"{layout.venv}/lib/python{layout.python}/site-packages/"
    if folder == layout.venv:
        here = Path(sysconfig.get_paths()["purelib"])
        return path.startswith(site) and (here / path.removeprefix(site)).exists()
    filled = next((f for f in layout.filled if path.startswith(f + "/")), None)
    return filled is not None and path in layout.text


def pod_objects(objects: list[Manifest]) -> Iterator[Pod]:
    """The pods of ``objects``: each Deployment's template and Spark's executor template."""
    for m in objects:
        if m["kind"] == "Deployment":
            template = m["spec"]["template"]
            yield Pod(m["metadata"]["name"], namespace_of(m), template["metadata"]["labels"],
                      template["spec"])  # fmt: skip
    for m in objects:
        if m["kind"] == "ConfigMap" and "executor-pod-template.yaml" in m["data"]:
            executor = yaml.safe_load(m["data"]["executor-pod-template.yaml"])
            yield Pod("executor", namespace_of(m), executor["metadata"]["labels"], executor["spec"])


def spark_conf(container: Manifest) -> dict[str, str]:
    env = {e["name"]: e.get("value") or "" for e in container.get("env", [])}
    args = env.get("PYSPARK_SUBMIT_ARGS", "").split()
    return dict(arg.split("=", 1) for arg in args if "=" in arg)


def declared_ports(pod: Pod, objects: list[Manifest]) -> set[str | int]:
    """Names and numbers of the ports ``pod``'s containers declare; for an executor, also the
    block manager's, which Spark's executor pods declare (spark.blockManager.port)."""
    ports: set[str | int] = set()
    for container in containers(pod):
        for port in container.get("ports", []):
            ports |= {port["containerPort"], *([port["name"]] if "name" in port else [])}
    if pod.labels.get("app.kubernetes.io/component") == "executor":
        for driver in pod_objects(objects):
            for container in driver.spec["containers"]:
                if "spark.kubernetes.executor.podTemplateFile" in spark_conf(container):
                    ports.add(int(spark_conf(container).get("spark.blockManager.port", 7079)))
    return ports


class Mounts(NamedTuple):
    """A container's view of its files: mount paths to volumes, and the objects behind them."""

    pod: Pod
    volumes: dict[str, Manifest | None]
    objects: dict[tuple[str, str, str], Manifest]

    def content(self, path: str) -> str | None:
        """The text of the Secret's or ConfigMap's key mounted at ``path``; "" for a folder, a
        path in an emptyDir or a claim (written at run time) or in the image; None when nothing
        is there."""
        mount = max(
            (m for m in self.volumes if path == m or path.startswith(m + "/")),
            key=len,
            default=None,
        )
        if mount is None:
            return "" if in_image(path) else None
        volume = self.volumes[mount]
        if volume is None or path == mount:
            return None if volume is None else ""
        source = volume.get("secret") or volume.get("configMap")
        if source is None:
            return ""
        kind = "Secret" if "secret" in volume else "ConfigMap"
        name = source.get("secretName") or source.get("name")
        found = self.objects.get((kind, self.pod.namespace, name), {})
        data = {**found.get("data", {}), **found.get("stringData", {})}
        items = {i["path"]: i["key"] for i in source.get("items", [])} or {k: k for k in data}
        key = items.get(path.removeprefix(mount + "/"))
        return None if key is None else data.get(key)


def paths_in(text: str) -> list[str]:
    return PATH_PATTERN.findall(URL_PATTERN.sub("", text))


def missing_files(container: Manifest, mounts: Mounts) -> Iterator[str]:
    """Paths ``container`` names (command, environment, Spark settings, probes, and the paths
    in the TOML files and serve's web config it reads) that no volume or the image holds."""
    texts = [*container.get("command", []), *container.get("args", [])]
    texts += [e.get("value", "") for e in container.get("env", [])]
    texts += list(spark_conf(container).values())
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        texts += container.get(probe, {}).get("exec", {}).get("command", [])
    paths = [path for text in texts for path in paths_in(text)]
    for path in paths:  # grows with the paths the files read name
        text = mounts.content(path)
        if text is None:
            yield f"{path} is neither mounted nor in the image"
        elif path.endswith(".toml") and text:
            settings = tomllib.loads(text)
            paths += paths_in(json.dumps(settings))
            web_config = settings.get("serve", {}).get("web_config_file")
            web = mounts.content(web_config) if web_config else None
            if web:
                folder = web_config.rsplit("/", 1)[0]
                tls = yaml.safe_load(web).get("tls_server_config", {})
                paths += [
                    tls[key] if tls[key].startswith("/") else f"{folder}/{tls[key]}"
                    for key in ("cert_file", "key_file", "client_ca_file")
                    if key in tls
                ]


def undeclared_probe_ports(container: Manifest, ports: set[str | int]) -> Iterator[str]:
    """Ports ``container``'s probes open that it does not declare (an exec probe may open a
    port its Spark settings fix)."""
    fixed = {int(v) for k, v in spark_conf(container).items() if k.endswith(".port")}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        spec = container.get(probe, {})
        for kind in ("tcpSocket", "httpGet", "grpc"):
            if kind in spec and spec[kind]["port"] not in ports:
                yield f"{probe} opens port {spec[kind]['port']}, not declared"
        command = " ".join(spec.get("exec", {}).get("command", []))
        for port in re.findall(r"create_connection\(\(\"[^\"]+\", (\d+)\)", command):
            if int(port) not in ports | fixed:
                yield f"{probe} opens port {port}, not declared"


def undeclared_target_ports(objects: list[Manifest]) -> Iterator[str]:
    """Ports a Service sends to, or a NetworkPolicy lets in to (or out to) pods of its own
    namespace, that those pods do not declare."""
    pods = list(pod_objects(objects))

    def selected(namespace: str, selector: Manifest) -> list[Pod]:
        return [p for p in pods if p.namespace == namespace and selects(selector, p.labels)]

    for m in objects:
        what = f"{m['kind']} {m['metadata']['name']}"
        targets: list[tuple[list[Pod], list[str | int]]] = []
        if m["kind"] == "Service":
            chosen = selected(namespace_of(m), {"matchLabels": m["spec"]["selector"]})
            if not chosen:
                yield f"{what} selects no pod"
            targets.append((chosen, [p.get("targetPort", p["port"]) for p in m["spec"]["ports"]]))
        if m["kind"] == "NetworkPolicy":
            peers = [(m["spec"]["podSelector"], r) for r in m["spec"].get("ingress", [])]
            peers += [
                (peer["podSelector"], r)
                for r in m["spec"].get("egress", [])
                for peer in r.get("to", [])
                if set(peer) == {"podSelector"}  # a pod of the same namespace
            ]
            for selector, rule in peers:
                ports = [p["port"] for p in rule.get("ports", [])]
                targets.append((selected(namespace_of(m), selector) if selector else [], ports))
        for chosen, ports in targets:
            for pod in chosen:
                for port in set(ports) - declared_ports(pod, objects):
                    yield f"{what}: {pod.name} declares no port {port}"


def dangling(objects: list[Manifest]) -> list[str]:
    """Every reference in ``objects`` that nothing defines: a Secret or ConfigMap key behind a
    path a container names, a path in the image, a port a probe, Service or NetworkPolicy names
    that the pods do not declare."""
    by_name = {(m["kind"], namespace_of(m), m["metadata"]["name"]): m for m in objects}
    problems = []
    for pod in pod_objects(objects):
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        for container in containers(pod):
            where = f"{pod.name}/{container['name']}"
            mounts = Mounts(
                pod,
                {m["mountPath"]: volumes.get(m["name"]) for m in container["volumeMounts"]},
                by_name,
            )
            problems += [f"{where}: {p}" for p in missing_files(container, mounts)]
            ports = declared_ports(pod, objects)
            problems += [f"{where}: {p}" for p in undeclared_probe_ports(container, ports)]
    return problems + list(undeclared_target_ports(objects))


def test_every_key_port_and_image_path_the_manifests_name_exists() -> None:
    assert dangling(manifests()) == []


def _find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    (found,) = [m for m in objects if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def _container(objects: list[Manifest], deployment: str) -> Manifest:
    return dict(
        _find(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]
    )


def _rename_key(data: Manifest, old: str, new: str) -> None:
    data[new] = data.pop(old)


def _edit_spark_args(objects: list[Manifest], deployment: str, old: str, new: str) -> None:
    (env,) = [
        e for e in _container(objects, deployment)["env"] if e["name"] == "PYSPARK_SUBMIT_ARGS"
    ]
    assert old in env["value"]
    env["value"] = env["value"].replace(old, new)


def _edit_executor_template(objects: list[Manifest], old: str, new: str) -> None:
    data = _find(objects, "ConfigMap", "consumer-offsets-config")["data"]
    assert old in data["executor-pod-template.yaml"]
    data["executor-pod-template.yaml"] = data["executor-pod-template.yaml"].replace(old, new)


#: A deliberate break of a copy of the manifests, and what the complaint must name.
BREAKAGES: dict[str, tuple[Callable[[list[Manifest]], object], str]] = {
    "Spark's secret key": (
        lambda o: _rename_key(
            _find(o, "Secret", "consumer-offsets-spark-auth")["stringData"], "auth-secret", "key"
        ),
        "/run/secrets/spark/auth-secret",
    ),
    "the executor template's key": (
        lambda o: _rename_key(
            _find(o, "ConfigMap", "consumer-offsets-config")["data"],
            "executor-pod-template.yaml",
            "executor.yaml",
        ),
        "executor-pod-template.yaml",
    ),
    "serve's certificate": (
        lambda o: _find(o, "Secret", "consumer-offsets-serve-web")["stringData"].pop("tls.crt"),
        "/etc/consumer-offsets-web/tls.crt",
    ),
    "serve's TOML": (
        lambda o: _rename_key(
            _find(o, "ConfigMap", "consumer-offsets-serve-config")["data"],
            "consumer-offsets.toml",
            "serve.toml",
        ),
        "/etc/consumer-offsets/consumer-offsets.toml",
    ),
    "serve's port name": (
        lambda o: _container(o, "consumer-offsets-serve")["ports"][0].update(name="http"),
        "port https",
    ),
    "the driver's port": (
        lambda o: _container(o, "consumer-offsets-job")["ports"][0].update(containerPort=7077),
        "port 7078",
    ),
    "the mirror's Spark port": (
        lambda o: _edit_spark_args(
            o, "consumer-offsets-mirror", "spark.driver.port=7078", "spark.driver.port=7077"
        ),
        "port 7078",
    ),
    "the health check's path": (
        lambda o: _container(o, "consumer-offsets-job")["readinessProbe"]["exec"].update(
            command=["python3", "/opt/consumer-offsets/health.py"]
        ),
        "/opt/consumer-offsets/health.py",
    ),
    "the executor's Python": (
        lambda o: _edit_executor_template(o, "python3.11", "python3.12"),
        "python3.12",
    ),
    "the executor's jars": (
        lambda o: _edit_executor_template(o, "jars/spark/", "jars/kafka/"),
        "jars/kafka",
    ),
    "the executor's block manager": (
        lambda o: _edit_spark_args(
            o,
            "consumer-offsets-job",
            "spark.blockManager.port=7079",
            "spark.blockManager.port=7080",
        ),
        "executor declares no port 7079",
    ),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_copy_of_the_manifests_is_caught(breakage: str) -> None:
    objects = manifests()
    breaks, named_in_complaint = BREAKAGES[breakage]
    breaks(objects)
    problems = dangling(objects)
    assert any(named_in_complaint in p for p in problems), problems
