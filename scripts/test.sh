#!/usr/bin/env bash
# The test command from the README. Installs what the tests need (apt packages
# when run as root, the Python test extras), then runs pytest over tests/ and
# the notebooks. Extra arguments go to pytest (e.g. -k fluid, -m "not root").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  command -v iperf3 >/dev/null || missing+=(iperf3)
  command -v ovs-vswitchd >/dev/null || missing+=(openvswitch-switch)
  command -v ethtool >/dev/null || missing+=(ethtool)
  command -v tcpdump >/dev/null || missing+=(tcpdump)
  command -v ss >/dev/null || missing+=(iproute2)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing system packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

python3 -m pip install -q --disable-pip-version-check -e ".[test]"
export TF_CPP_MIN_LOG_LEVEL=2 MPLBACKEND=Agg
exec python3 -m pytest -q --nbmake tests notebooks "$@"
