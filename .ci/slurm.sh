#!/usr/bin/env bash
# Install the Debian packages a real Slurm 22.05 needs (gpupool.conformance.real_slurm).
# Idempotent: installs only what is missing; falls back to apt-get update when the cache is stale.
set -uo pipefail
pkgs=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server faketime)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null || { echo "no apt-get: cannot install ${missing[*]}" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/gpupool-ci-slurm-apt.log 2>&1 || {
  apt-get update >>/tmp/gpupool-ci-slurm-apt.log 2>&1
  apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/gpupool-ci-slurm-apt.log 2>&1
} || { tail -5 /tmp/gpupool-ci-slurm-apt.log >&2; exit 1; }
