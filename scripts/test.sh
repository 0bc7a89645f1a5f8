#!/usr/bin/env bash
# The test command from the README. Installs what the tests need (apt packages
# when run as root, the Python test extras), then runs pytest over tests/ and
# the notebooks. Extra arguments go to pytest (e.g. -k fluid, -m "not root").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # iperf3/OVS/iproute2/ethtool/tcpdump: the netns testbed; tshark: the
  # reference reader of the telemetry's capture corpus; chromium: the
  # dashboard test; libnetfilter-queue-dev/iptables/clang/libbpf-dev: the
  # bottleneck data-path stage and the eBPF telemetry; systemd: `systemd-analyze
  # verify` of deploy/systemd/ (nothing runs systemd here); the rest: the runtime
  # of ../shared/p4tc.
  # (DEBIAN_FRONTEND=noninteractive answers wireshark-common's debconf question.)
  want=(iperf3 openvswitch-switch ethtool tcpdump tshark iproute2 iptables systemd
        chromium chromium-driver libnetfilter-queue-dev clang libbpf-dev
        xz-utils gcc libabsl20220623 libboost-iostreams1.74.0
        libboost-program-options1.74.0 libgc1 libgmp10 libgrpc++1.51 libgrpc29
        libjsoncpp25 libnanomsg5 libpcap0.8 libprotobuf32 libstdc++6
        libthrift-0.17.0 libxxhash0 python3-six python3-thrift)
  missing=()
  for pkg in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing system packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# The P4 toolchain (p4c, BMv2) from ../shared/p4tc, unpacked once into a cache.
if p4bin=$(bash scripts/install_p4tc.sh); then
  export PATH="$p4bin:$PATH"
fi

python3 -m pip install -q --disable-pip-version-check -e ".[test]"
export TF_CPP_MIN_LOG_LEVEL=2 MPLBACKEND=Agg
# Lint first (config in pyproject.toml): style, ARCHITECTURE.md's import
# layers, dead code (vulture_allow.py lists framework callbacks, with reasons).
ruff check src tests benchmarks
lint-imports
python3 scripts/check_cycles.py
vulture
exec python3 -m pytest -q --durations=20 --nbmake tests notebooks "$@"
