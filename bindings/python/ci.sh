#!/usr/bin/env bash
# The Python package as a new user gets it: a fresh virtual environment,
# `pip install ./bindings/python` (maturin from PyPI builds the abi3 wheel),
# then the pytest suite, the example hook's tests, the quickstart, mypy
# (strict) over the package, its stubs, the tests, the examples and the
# benchmark, and the benchmark against cedarpy in its short form.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/target/python-ci"
if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "$here[test]" cedarpy
cd "$here"
GATEHOUSE_EGRESS="${GATEHOUSE_EGRESS:-$root/target/release/gatehouse-egress}" \
  GATEHOUSE_RUN="${GATEHOUSE_RUN:-$root/target/release/gatehouse-run}" "$venv/bin/python" -m pytest -q -p no:cacheprovider
"$venv/bin/python" -m mypy --strict --cache-dir "$venv/mypy-cache" python/gatehouse examples tests bench
cd "$root"
"$venv/bin/python" bindings/python/examples/quickstart.py > /dev/null
# The comparison with cedarpy runs (a short stream; BENCHMARKS.md has the
# full run), and the two engines agree on every query first.
"$venv/bin/python" bindings/python/bench/compare_cedar.py --quick
echo "python package: ok"
