#!/usr/bin/env bash
# Usage: scripts/focus-validator.sh
# Prints the path of the FinOps Foundation's `focus-validator`, installed once in a test-only
# environment of its own: it needs Python >= 3.12 and the portal runs on 3.11, so it never
# enters the portal's virtualenv. What it installs is scripts/focus-validator.lock, every
# package pinned and installed as written (--no-deps), so every clone installs the same thing;
# the environment is named by the lock's hash, so a changed lock installs afresh. The Python is
# a 3.12 or 3.13 on PATH or among pyenv's versions when there is one; else CPython 3.13 built
# once from Debian's source package (`apt-get source`, through an apt configuration of its own:
# the system's sources are untouched), Debian's packages and PyPI being the only registries at
# hand. Everything is kept in FOCUS_CACHE (default ~/.cache/token-factory-portal/focus), so a
# second run prints at once. Installing from scratch (no pip cache) with pyenv's 3.12.1 takes
# 1 min 45 s to 4 min 45 s on 2 cores, depending on their load (45 s of CPU, the rest
# downloading 39 packages); building CPython first about 5 min more.
#
# The validator writes its log (focus_validator_detailed.log) and reads its currency codes
# relative to where it runs: this script runs it in a temporary folder, and so does
# tests/billing/test_focus_validator.py, never in the repository.
set -euo pipefail

lock="$(cd "$(dirname "$0")" && pwd)/focus-validator.lock"
cache=${FOCUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/token-factory-portal/focus}
venv="$cache/venv-$(sha256sum "$lock" | cut -c1-16)"
say() { echo "focus-validator: $*" >&2; }

if [ -e "$venv/installed" ]; then  # written once the install below has succeeded
  echo "$venv/bin/focus-validator"
  exit 0
fi
mkdir -p "$cache"

# A Python >= 3.12 that runs (a pyenv shim of a version not selected does not): on PATH, among
# pyenv's versions (this machine's image has 3.12 and 3.13 there), else the one built here.
python=""
pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
for candidate in python3.12 python3.13 "$pyenv_root"/versions/3.12*/bin/python3.12 \
                 "$pyenv_root"/versions/3.13*/bin/python3.13 "$cache/python/bin/python3.13"; do
  if "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python=$(command -v "$candidate"); break
  fi
done

build_python() {
  # CPython 3.13 from Debian's source package, built into $cache/python (about 5 min, 2 cores).
  local apt="$cache/apt" src="$cache/src"
  local build_deps=(build-essential xz-utils libssl-dev zlib1g-dev libffi-dev libsqlite3-dev
                    libbz2-dev liblzma-dev libexpat1-dev)
  local missing=()
  for package in "${build_deps[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || { say "missing ${missing[*]} (install them, or run as root)"; exit 1; }
    say "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/etc" "$src"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
       "http://deb.debian.org/debian trixie main" > "$apt/etc/sources.list"
  local options=(-o "Dir::Etc::SourceList=$apt/etc/sources.list"
                 -o "Dir::Etc::SourceParts=$apt/etc" -o "Dir::State::Lists=$apt/lists"
                 -o "Dir::Cache=$apt" -o "APT::Sandbox::User=root")
  say "fetching Debian's source of python3.13"
  apt-get "${options[@]}" update -q >/dev/null
  (cd "$src" && apt-get "${options[@]}" source --download-only -q python3.13 >/dev/null)
  local tarball
  tarball=$(ls "$src"/python3.13_*.orig.tar.xz | sort -V | tail -n 1)
  rm -rf "$src/build" && mkdir "$src/build"
  tar -xJf "$tarball" -C "$src/build" --strip-components=1
  say "building CPython from $(basename "$tarball") (a few minutes)"
  (cd "$src/build" && ./configure --prefix="$cache/python" >"$src/configure.log" 2>&1 \
    && make -j"$(nproc)" >"$src/make.log" 2>&1 && make altinstall >"$src/install.log" 2>&1) \
    || { say "the build failed: see $src/*.log"; exit 1; }
  rm -rf "$src/build"
  python="$cache/python/bin/python3.13"
}

[ -n "$python" ] || build_python
say "installing $(grep -o '^focus-validator==[^ ]*' "$lock") with $("$python" --version)"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$lock"
# The lock is whole: nothing missing or at odds but the numpy the lock's header explains.
problems=$("$venv/bin/python" -m pip check 2>&1 | grep -v '^focus-validator .* numpy<2' || true)
[ -z "$problems" ] || { say "scripts/focus-validator.lock is incomplete: $problems"; exit 1; }
scratch=$(mktemp -d)
(cd "$scratch" && "$venv/bin/focus-validator" --help >/dev/null)
rm -rf "$scratch"
cp "$lock" "$venv/installed"
echo "$venv/bin/focus-validator"
