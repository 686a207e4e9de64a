#!/usr/bin/env bash
# `policyc export cilium` output (the golden files, which policyc/tests/export.rs
# holds equal to what policyc writes) checked against the shapes the
# CiliumNetworkPolicy CRD requires (validate_cilium.py, PyYAML in a venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
venv="$root/target/export-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import yaml' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet pyyaml
fi
"$venv/bin/python" tests/export/validate_cilium.py tests/golden/export/*.cilium.yaml examples/integrations/cilium/*.yaml
# The other shipped configurations are YAML at least (Envoy, Istio: their
# programs do not run here).
"$venv/bin/python" - examples/integrations/envoy/*.yaml examples/integrations/istio/*.yaml <<'PY'
import sys, yaml
for p in sys.argv[1:]:
    list(yaml.safe_load_all(open(p)))
print(f"{len(sys.argv) - 1} Envoy and Istio files parse as YAML")
PY

# Host mode's deployment examples (examples/host): the Compose file parses;
# the Kubernetes manifests render with kubectl's own kustomize (offline),
# and hold what docs/host.md says they do.
"$venv/bin/python" - examples/host/docker/compose.yaml <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
egress = c["services"]["egress"]
assert egress["network_mode"] == "host" and "NET_ADMIN" in egress["cap_add"], egress
for name, s in c["services"].items():
    if name != "egress":
        assert "NET_ADMIN" in s["cap_drop"] and "NET_RAW" in s["cap_drop"], name
assert c["networks"]["sandboxes"]["ipam"]["config"][0]["subnet"] == "10.200.0.0/16"
print("examples/host/docker/compose.yaml: the daemon on the host's network, sandboxes without NET_ADMIN")
PY
if command -v kubectl >/dev/null 2>&1; then
  kubectl kustomize examples/host > target/host-k8s.yaml
  "$venv/bin/python" - target/host-k8s.yaml <<'PY'
import sys, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1]))}
ds = docs["DaemonSet"]["spec"]["template"]["spec"]
assert ds["hostNetwork"] is True
c = ds["containers"][0]
assert "NET_ADMIN" in c["securityContext"]["capabilities"]["add"]
cm = docs["ConfigMap"]
assert {"sandboxes.toml", "ci.policy", "research.policy"} <= set(cm["data"])
assert any(v.get("configMap", {}).get("name") == cm["metadata"]["name"] for v in ds["volumes"])
np = docs["NetworkPolicy"]["spec"]
blocks = [t["ipBlock"] for e in np["egress"] for t in e["to"] if "ipBlock" in t]
assert any("169.254.169.254/32" in b.get("except", []) for b in blocks), blocks
print("examples/host: kubectl kustomize renders the DaemonSet, its ConfigMap and the baseline NetworkPolicy")
PY
else
  echo "examples/host: kubectl is not installed; the Kubernetes manifests were only parsed" >&2
  "$venv/bin/python" -c 'import sys, yaml; [list(yaml.safe_load_all(open(p))) for p in sys.argv[1:]]' examples/host/kubernetes/*.yaml examples/host/kustomization.yaml
fi

