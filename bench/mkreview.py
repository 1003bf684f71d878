#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the benchmark AdmissionReviews into tests/fixtures/bench/.

    bench/mkreview.py [OUTDIR]

review-agent.json is the realistic one: what the apiserver sends a mutating
webhook for an agent Pod created by a ReplicaSet (three containers: the
agent, a tool proxy and a log shipper, plus an init container that fetches
the model), with the fields admission plugins have already filled in
(service account volume, tolerations, managedFields, defaults).
review-1c/-10c/-100c.json are the same pod with 1, 10 and 100 containers
(and the init container). The output is deterministic, so the committed
fixtures can be regenerated and compared.
"""

import json
import os
import sys

NS = "bench-agent"


def env(i):
    """The environment of an agent container."""
    return [
        {"name": "AGENT_ID", "value": "agent-%d" % i},
        {"name": "MODEL_DIR", "value": "/models/llama-3-8b-instruct"},
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT",
         "value": "http://otel-collector.observability:4317"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {
            "name": "agent-secrets", "key": "api-key"}}},
    ]


def mounts():
    """The volume mounts every container gets."""
    return [
        {"name": "models", "mountPath": "/models", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "kube-api-access-7xk2p", "readOnly": True,
         "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ]


def container(name, image, i, probes=True):
    """One container as the apiserver has defaulted it."""
    c = {
        "name": name,
        "image": image,
        "args": ["--listen=:%d" % (8080 + i), "--log-format=json"],
        "ports": [{"name": "http", "containerPort": 8080 + i,
                   "protocol": "TCP"}],
        "env": env(i),
        "resources": {"limits": {"cpu": "2", "memory": "8Gi"},
                      "requests": {"cpu": "500m", "memory": "2Gi"}},
        "volumeMounts": mounts(),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True},
    }
    if probes:
        c["readinessProbe"] = {
            "httpGet": {"path": "/readyz", "port": 8080 + i,
                        "scheme": "HTTP"},
            "timeoutSeconds": 1, "periodSeconds": 10,
            "successThreshold": 1, "failureThreshold": 3}
        c["livenessProbe"] = dict(c["readinessProbe"],
                                  httpGet={"path": "/healthz",
                                           "port": 8080 + i,
                                           "scheme": "HTTP"})
    return c


def containers(n):
    """n containers: agent, tool proxy, log shipper, then more workers."""
    named = [("agent", "ghcr.io/example/agent-runtime:1.8.2"),
             ("tool-proxy", "ghcr.io/example/tool-proxy:0.4.1"),
             ("log-shipper", "docker.io/fluent/fluent-bit:3.0.4")]
    out = []
    for i in range(n):
        name, image = named[i] if i < len(named) else \
            ("worker-%d" % i, "ghcr.io/example/agent-worker:1.8.2")
        out.append(container(name, image, i, probes=i != 2))
    return out


def pod(n):
    """The Pod object of the review."""
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "generateName": "research-agent-6d9f7c8b5-",
            "namespace": NS,
            "labels": {"app.kubernetes.io/name": "research-agent",
                       "app.kubernetes.io/instance": "team-a-agent",
                       "app.kubernetes.io/managed-by": "kubeplus",
                       "pod-template-hash": "6d9f7c8b5"},
            "annotations": {"kubectl.kubernetes.io/default-container":
                            "agent",
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": "9090"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "research-agent-6d9f7c8b5",
                "uid": "2b9c1f4e-7a43-4d1e-9b52-0f3c8e2d6a11",
                "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{
                "manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "v1", "time": "2026-11-29T09:12:44Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {
                    "f:generateName": {}, "f:labels": {
                        ".": {}, "f:app.kubernetes.io/name": {},
                        "f:app.kubernetes.io/instance": {},
                        "f:pod-template-hash": {}},
                    "f:ownerReferences": {
                        ".": {},
                        'k:{"uid":"2b9c1f4e-7a43-4d1e-9b52-0f3c8e2d6a11"}':
                        {}}},
                    "f:spec": {"f:containers": {
                        'k:{"name":"%s"}' % c["name"]: {
                            ".": {}, "f:image": {}, "f:name": {},
                            "f:resources": {}}
                        for c in containers(min(n, 3))}}}}],
        },
        "spec": {
            "initContainers": [dict(container(
                "fetch-model", "ghcr.io/example/model-fetcher:2.1.0", 99,
                probes=False), ports=[])],
            "containers": containers(n),
            "volumes": [
                {"name": "models", "persistentVolumeClaim": {
                    "claimName": "model-cache", "readOnly": True}},
                {"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}},
                {"name": "kube-api-access-7xk2p", "projected": {
                    "defaultMode": 420, "sources": [
                        {"serviceAccountToken": {
                            "expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt",
                                       "items": [{"key": "ca.crt",
                                                  "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace",
                            "fieldRef": {"apiVersion": "v1",
                                         "fieldPath":
                                         "metadata.namespace"}}]}}]}}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "research-agent",
            "serviceAccount": "research-agent",
            "securityContext": {"runAsUser": 10001, "fsGroup": 10001,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable",
                 "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def review(n):
    """The AdmissionReview around pod(n)."""
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    return {
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "7f4e2a9c-3b1d-4c8e-a6f2-%012d" % n,
            "kind": gvk, "resource": gvr,
            "requestKind": gvk, "requestResource": gvr,
            "namespace": NS, "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:"
                            "replicaset-controller",
                "uid": "5021",
                "groups": ["system:serviceaccounts",
                           "system:serviceaccounts:kube-system",
                           "system:authenticated"]},
            "object": pod(n),
            "oldObject": None, "dryRun": False,
            "options": {"kind": "CreateOptions",
                        "apiVersion": "meta.k8s.io/v1"}}}


def main():
    """Write the four fixtures."""
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests",
        "fixtures", "bench")
    os.makedirs(out, exist_ok=True)
    for name, n in (("review-agent", 3), ("review-1c", 1),
                    ("review-10c", 10), ("review-100c", 100)):
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(review(n), f, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    main()
