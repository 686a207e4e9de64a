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
