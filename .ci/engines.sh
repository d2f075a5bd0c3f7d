#!/usr/bin/env bash
# System packages the integration tests start for real (tests/integration): Slurm 22.05 with
# slurmdbd and MariaDB, iproute2 for network namespaces and tc. Installed only when missing,
# only as root with apt-get; elsewhere those tests skip and say why. CI=true makes a failure fatal.
set -uo pipefail
need=()
for c in slurmctld slurmd sbatch slurmdbd mariadbd ip tc nsenter; do
  command -v "$c" >/dev/null 2>&1 || need+=("$c")
done
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "engines: missing ${need[*]}; not root with apt-get, so the integration tests that need them will skip" >&2
  exit 0
fi
echo "engines: installing Slurm, MariaDB and iproute2 (missing: ${need[*]})" >&2
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq && apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client slurmdbd mariadb-server mariadb-client iproute2 util-linux >/dev/null; then
  exit 0
fi
echo "engines: apt-get failed" >&2
[ "${CI:-}" = "true" ] && exit 1
exit 0
