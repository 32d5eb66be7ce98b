#!/usr/bin/env bash
# Makes sure redis-server is on PATH: installs Debian's redis-server with
# apt-get when it is missing and we are root; otherwise says what to install.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "redis-server is missing. Install it (Debian/Ubuntu: sudo apt-get install redis-server) and run this again." >&2
  exit 1
fi
echo "installing redis-server with apt-get..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# The package's service is not needed: tests and the demo start their own
# servers on free ports. policy-rc.d keeps the package from starting one.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq redis-server >&2
command -v redis-server >/dev/null
