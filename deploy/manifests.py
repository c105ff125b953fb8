"""Kubernetes manifests for toolcodec, made from one values file (``deploy/values.yaml``).

:func:`render` takes the values (a user's file merged over the defaults) and returns
``{file name: [documents]}``: ``serve.yaml`` (Deployment, Service, the model config ConfigMap,
HPA, PodDisruptionBudget, NetworkPolicy), ``worker.yaml`` and ``redis.yaml`` for the rq
backend, ``monitoring.yaml`` (ServiceMonitor). ``deploy/generate.py`` adds the PrometheusRule and
the dashboards ConfigMap and writes them. A Deployment that an autoscaler (HPA or KEDA) scales
has no ``replicas:``: the two would fight over it on every ``kubectl apply``.
"""

from __future__ import annotations

import copy
from typing import Any

NAME = "toolcodec"
MODELS_PATH = "/etc/toolcodec/models.yaml"
EXPORTER_IMAGE = "oliver006/redis_exporter:v1.62.0"
REDIS_IMAGE = "redis:7.2-alpine"


def merged(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """*given* over *defaults*, mappings merged key by key (``modelConfig`` replaced whole)."""
    out = copy.deepcopy(defaults)
    for key, value in (given or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "modelConfig":
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(values: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The manifests for *values* (complete: merged over ``deploy/values.yaml``)."""
    if values["backend"] not in ("rq", "process"):
        raise ValueError(f"backend must be rq or process, got {values['backend']!r}")
    files = {"serve.yaml": serve(values)}
    if values["backend"] == "rq":
        files["worker.yaml"] = worker(values)
        if values["redis"]["deploy"]:
            files["redis.yaml"] = redis(values)
    if values["monitoring"]["serviceMonitor"]:
        files["monitoring.yaml"] = [service_monitor(values)]
    return files


# -- pieces -----------------------------------------------------------------------------------


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": component}


def _meta(name: str, component: str, values: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": values["namespace"], "labels": _labels(component),
            **extra}


def _image(values: dict[str, Any]) -> dict[str, str]:
    image = values["image"]
    return {"image": f"{image['repository']}:{image['tag']}",
            "imagePullPolicy": image["pullPolicy"]}


RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


def _pod_security(uid: int) -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"}}


def _spread(component: str) -> dict[str, Any]:
    """Replicas spread over nodes, so one node lost is not the service."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                           "labelSelector": {"matchLabels": _labels(component)}},
    }]}}


def _redis_env(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": values["redis"]["passwordSecret"], "key": "password"}}}]


def _deployment(name: str, component: str, values: dict[str, Any], scaled: dict[str, Any],
                pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if scaled["autoscaling"]["kind"] == "none":  # else the autoscaler owns the count
        spec["replicas"] = scaled["replicas"]
    spec |= {"selector": {"matchLabels": _labels(component)},
             "template": {"metadata": {"labels": _labels(component)}, "spec": pod}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _meta(name, component, values), "spec": spec}


def _hpa(name: str, component: str, values: dict[str, Any], scaling: dict[str, Any]
         ) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(name, component, values),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": name},
                     "minReplicas": scaling["minReplicas"],
                     "maxReplicas": scaling["maxReplicas"],
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization",
                         "averageUtilization": scaling["cpuUtilization"]}}}]}}


def _pdb(name: str, component: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(name, component, values),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": _labels(component)}}}


def _ingress_policy(name: str, component: str, values: dict[str, Any],
                    rules: list[dict[str, Any]], selector: dict[str, str] | None = None
                    ) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _meta(name, component, values),
            "spec": {"podSelector": {"matchLabels": selector or _labels(component)},
                     "policyTypes": ["Ingress"], "ingress": rules}}


def _from_monitoring(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": values["monitoring"]["namespace"]}}}]


# -- serve --------------------------------------------------------------------------------------


def serve(values: dict[str, Any]) -> list[dict[str, Any]]:
    """serve: the HTTP service (and the proxy), its Service, scaling, budget and policy.

    Shutdown: Kubernetes takes the pod out of the Service, preStop waits 5 s for that to reach
    every proxy, SIGTERM makes /readyz fail while serve keeps answering (with Connection:
    close) for --shutdown-delay-s, then jobs in flight finish within --drain-s: 5 + 5 + 15 s
    < terminationGracePeriodSeconds.
    """
    cfg, proxy = values["serve"], values["proxy"]
    args = ["serve", "--host", "0.0.0.0", "--port", "8080", "--backend", values["backend"],
            "--timeout-ms", str(cfg["timeoutMs"]), "--shutdown-delay-s", "5", "--drain-s", "15",
            "--log-format", values["logFormat"]]
    if values["accessLog"]:
        args.append("--access-log")
    env: list[dict[str, Any]] = []
    if values["backend"] == "rq":
        args += ["--redis-url", values["redis"]["url"], "--queue", NAME]
        env = _redis_env(values)
    else:
        args += ["--workers", str(cfg["workers"])]
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    docs: list[dict[str, Any]] = []
    if proxy and proxy.get("upstream"):
        args += ["--upstream", proxy["upstream"], "--proxy-config", MODELS_PATH]
        mounts.append({"name": "models", "mountPath": "/etc/toolcodec", "readOnly": True})
        volumes.append({"name": "models", "configMap": {"name": "toolcodec-models"}})
        docs.append(models_config_map(values))
    container = {
        "name": "serve", **_image(values), "args": args,
        **({"env": env} if env else {}),
        "ports": [{"name": "http", "containerPort": 8080}],
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        # "can take work": a busy pod, a worker re-forking after a deadline kill and a Redis
        # blip under 5 s all stay ready
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 2,
                           "failureThreshold": 2},
        "securityContext": RESTRICTED_CONTAINER, "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "250m", "memory": "128Mi"},
                      "limits": {"cpu": "1" if values["backend"] == "rq" else "2",
                                 "memory": "512Mi"}},
    }
    pod = {"terminationGracePeriodSeconds": 35, "automountServiceAccountToken": False,
           "securityContext": _pod_security(10001), "affinity": _spread("serve"),
           "containers": [container], "volumes": volumes}
    docs = [_deployment("toolcodec-serve", "serve", values, cfg, pod), *docs,
            {"apiVersion": "v1", "kind": "Service",
             "metadata": _meta("toolcodec-serve", "serve", values),
             "spec": {"selector": _labels("serve"),
                      "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]}}]
    if cfg["autoscaling"]["kind"] == "hpa":
        docs.append(_hpa("toolcodec-serve", "serve", values, cfg["autoscaling"]))
    if values["pdb"]:
        docs.append(_pdb("toolcodec-serve", "serve", values))
    # clients reach serve on 8080; Prometheus scrapes the same port
    docs.append(_ingress_policy("toolcodec-serve", "serve", values,
                                [{"ports": [{"port": 8080, "protocol": "TCP"}]}]))
    return docs


def models_config_map(values: dict[str, Any]) -> dict[str, Any]:
    """The proxy's model config (decoder options per model), as serve reads it."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta("toolcodec-models", "serve", values),
            "data": {"models.yaml": models_yaml(values)}}


def models_yaml(values: dict[str, Any]) -> str:
    import yaml  # the generator's own dependency (the test extra), not the package's

    return yaml.safe_dump(values["proxy"]["modelConfig"], sort_keys=False, width=100)


# -- rq workers ---------------------------------------------------------------------------------


def worker(values: dict[str, Any]) -> list[dict[str, Any]]:
    """RQ workers: Deployment, metrics Service, scaling, budget and policy."""
    cfg = values["worker"]
    container = {
        "name": "worker", **_image(values),
        "args": ["worker", "--redis-url", values["redis"]["url"], "--queue", NAME,
                 "--concurrency", str(cfg["concurrency"]), "--metrics-port", "9100",
                 "--log-format", values["logFormat"]],
        "env": _redis_env(values),
        "ports": [{"name": "metrics", "containerPort": 9100}],
        # the metrics endpoint answers while the lanes' process lives
        "livenessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"},
                          "periodSeconds": 10},
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"},
                           "periodSeconds": 10},
        "securityContext": RESTRICTED_CONTAINER,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "resources": {"requests": {"cpu": "1", "memory": "256Mi"},
                      "limits": {"cpu": "2", "memory": "512Mi"}},
    }
    pod = {"terminationGracePeriodSeconds": 20, "automountServiceAccountToken": False,
           "securityContext": _pod_security(10001), "affinity": _spread("worker"),
           "containers": [container], "volumes": [{"name": "tmp", "emptyDir": {}}]}
    docs = [_deployment("toolcodec-worker", "worker", values, cfg, pod),
            {"apiVersion": "v1", "kind": "Service",
             "metadata": _meta("toolcodec-worker-metrics", "worker", values),
             "spec": {"clusterIP": "None", "selector": _labels("worker"),
                      "ports": [{"name": "metrics", "port": 9100, "targetPort": "metrics"}]}}]
    scaling = cfg["autoscaling"]
    if scaling["kind"] == "keda":
        docs.append(scaled_object(values))
    elif scaling["kind"] == "hpa":
        docs.append(_hpa("toolcodec-worker", "worker", values, scaling))
    if values["pdb"]:
        docs.append(_pdb("toolcodec-worker", "worker", values))
    # workers take no connections but Prometheus' scrapes
    docs.append(_ingress_policy("toolcodec-worker", "worker", values, [{
        "from": _from_monitoring(values), "ports": [{"port": 9100, "protocol": "TCP"}]}]))
    return docs


def scaled_object(values: dict[str, Any]) -> dict[str, Any]:
    """KEDA: scale on how busy the lanes are, not on the queue's length (with 50 ms jobs the
    queue stays short even under overload; jobs time out instead): the lanes' busy time per
    second measured in the workers of this namespace (two installs in one cluster are scaled
    apart), one pod per ``busyLanesPerPod`` busy lanes."""
    scaling = values["worker"]["autoscaling"]
    query = ("sum(rate(toolcodec_worker_job_duration_seconds_sum"
             f'{{namespace="{values["namespace"]}",backend="rq"}}[1m]))')
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": _meta("toolcodec-worker", "worker", values),
            "spec": {"scaleTargetRef": {"name": "toolcodec-worker"},
                     "minReplicaCount": scaling["minReplicas"],
                     "maxReplicaCount": scaling["maxReplicas"], "pollingInterval": 15,
                     "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                         "scaleDown": {"stabilizationWindowSeconds": 300}}}},
                     "triggers": [{"type": "prometheus", "metadata": {
                         "serverAddress": scaling["prometheus"], "query": query,
                         "threshold": str(scaling["busyLanesPerPod"])}}]}}


# -- Redis ----------------------------------------------------------------------------------------


def redis(values: dict[str, Any]) -> list[dict[str, Any]]:
    """One Redis for the queue, with a password, and a redis_exporter sidecar whose
    ``redis_up`` feeds ToolcodecBackendDown. Create the password first (hex, so it needs no
    escaping in a redis:// URL): ``kubectl create secret generic toolcodec-redis
    --from-literal=password=$(openssl rand -hex 24)``. For production prefer a managed Redis
    with TLS (docs/rq.md "Security")."""
    env = _redis_env(values)
    containers: list[dict[str, Any]] = [{
        "name": "redis", "image": REDIS_IMAGE, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c",
                    'exec redis-server --save "" --appendonly no --requirepass "$REDIS_PASSWORD"'],
        "env": env, "ports": [{"name": "redis", "containerPort": 6379}],
        "readinessProbe": {"exec": {"command": [
            "sh", "-c", 'redis-cli -a "$REDIS_PASSWORD" --no-auth-warning ping']},
            "periodSeconds": 5},
        "securityContext": RESTRICTED_CONTAINER,
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
    }]
    if values["redis"]["exporter"]:
        containers.append({
            "name": "exporter", "image": EXPORTER_IMAGE, "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "REDIS_ADDR", "value": "redis://127.0.0.1:6379"}, *env],
            "ports": [{"name": "metrics", "containerPort": 9121}],
            "securityContext": RESTRICTED_CONTAINER,
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                          "limits": {"cpu": "100m", "memory": "64Mi"}},
        })
    pod = {"automountServiceAccountToken": False,
           "securityContext": {**_pod_security(999), "fsGroup": 999},  # the image's redis user
           "containers": containers, "volumes": [{"name": "data", "emptyDir": {}}]}
    redis_labels = {"app.kubernetes.io/name": "toolcodec-redis"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "toolcodec-redis", "namespace": values["namespace"],
                               "labels": redis_labels},
                  "spec": {"replicas": 1, "selector": {"matchLabels": redis_labels},
                           "template": {"metadata": {"labels": redis_labels}, "spec": pod}}}
    docs = [deployment,
            {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "toolcodec-redis", "namespace": values["namespace"],
                          "labels": redis_labels},
             "spec": {"selector": redis_labels,
                      "ports": [{"name": "redis", "port": 6379, "targetPort": "redis"}]}}]
    rules: list[dict[str, Any]] = [{  # only toolcodec's pods: anyone who writes can submit jobs
        "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}}}],
        "ports": [{"port": 6379, "protocol": "TCP"}]}]
    if values["redis"]["exporter"]:
        # its own Service, labelled as toolcodec's, so the ServiceMonitor scrapes it
        docs.append({"apiVersion": "v1", "kind": "Service",
                     "metadata": _meta("toolcodec-redis-metrics", "redis", values),
                     "spec": {"selector": redis_labels, "ports": [
                         {"name": "metrics", "port": 9121, "targetPort": "metrics"}]}})
        rules.append({"from": _from_monitoring(values),
                      "ports": [{"port": 9121, "protocol": "TCP"}]})
    docs.append(_ingress_policy("toolcodec-redis", "redis", values, rules, redis_labels))
    return docs


# -- monitoring ---------------------------------------------------------------------------------


def service_monitor(values: dict[str, Any]) -> dict[str, Any]:
    """Scrape serve, the workers and the Redis exporter (job label: the Service's name).
    kube-prometheus-stack selects it by the label ``release=<its Helm release>``."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": NAME, "namespace": values["namespace"],
                         "labels": {"app.kubernetes.io/name": NAME,
                                    "release": values["monitoring"]["release"]}},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                     "endpoints": [{"port": "http", "path": "/metrics", "interval": "15s"},
                                   {"port": "metrics", "path": "/metrics", "interval": "15s"}]}}
