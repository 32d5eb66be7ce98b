#!/usr/bin/env bash
# Makes sure each COMMAND is on PATH: installs the Debian PACKAGE that has it
# with apt-get when it is missing and we are root; otherwise says what to
# install. Usage: hack/ensure-packages.sh COMMAND:PACKAGE...
# A PACKAGE written PACKAGE/SUITE comes from that Debian suite, which is
# added to apt's sources first when it is missing (valkey-server comes from
# bookworm-backports).
# (make redis: redis-server; make packages: also promtool, for the chart's
# alert tests, and valkey-server, for the engine's tests on Valkey.)
set -euo pipefail
missing=()
for pair in "$@"; do
  cmd=${pair%%:*} pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing: ${missing[*]}. Install (Debian/Ubuntu: sudo apt-get install --no-install-recommends ${missing[*]}) and run this again." >&2
  exit 1
fi
echo "installing ${missing[*]} with apt-get..." >&2
export DEBIAN_FRONTEND=noninteractive
for pkg in "${missing[@]}"; do
  case $pkg in */*)
    suite=${pkg#*/}
    if ! grep -rqs -- "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "adding the Debian suite $suite to apt's sources, for $pkg" >&2
      echo "deb http://deb.debian.org/debian $suite main" > "/etc/apt/sources.list.d/$suite.list"
    fi
  esac
done
apt-get update -qq >&2
# The packages' services are not needed: tests and the demo start their own
# servers on free ports. policy-rc.d keeps the packages from starting one.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
for pair in "$@"; do
  command -v "${pair%%:*}" >/dev/null
done
