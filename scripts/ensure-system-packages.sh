#!/usr/bin/env bash
# Install the system packages the test suite needs (PostgreSQL, Redis, Chromium, Pango,
# Prometheus) when their binaries are missing and we are root. Nothing is downloaded outside
# Debian's packages.
set -euo pipefail
missing=()
ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -x /usr/bin/chromium ] || missing+=(chromium)
# WeasyPrint (invoice and report PDFs) loads Pango through ctypes.
ldconfig -p | grep -q "libpangoft2-1.0.so.0" || missing+=(libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0)
# The /metrics test scrapes the portal with a real Prometheus and checks the text with promtool.
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "Missing system packages: ${missing[*]} (install them, or run as root)." >&2
  exit 1
fi
echo "Installing ${missing[*]} with apt-get…"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
