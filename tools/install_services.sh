#!/usr/bin/env bash
# Install Debian's PostgreSQL and nginx, which tests/support/postgres.py and nginx.py run as throwaway servers.
# Idempotent: does nothing when both binaries are already there.
#
# The tests never use the services these packages set up (Debian's default cluster on port 5432,
# nginx on port 80): they start their own servers on free ports with their own data and sockets.
# During the install a policy-rc.d keeps those services from starting, so none is left running.
set -euo pipefail

packages=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || packages+=(postgresql)
[[ -x /usr/sbin/nginx ]] || packages+=(nginx)

if ((${#packages[@]} == 0)); then
    exit 0
fi

if ((EUID == 0)); then
    as_root=()
elif command -v sudo >/dev/null; then
    as_root=(sudo)
else
    echo "install_services.sh: ${packages[*]} missing, and installing needs root or sudo;" \
        "run as root: apt-get install ${packages[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "install_services.sh: ${packages[*]} missing and there is no apt-get: install them by hand" >&2
    exit 1
fi

# Exit code 101 of policy-rc.d tells invoke-rc.d and deb-systemd-invoke not to start services.
# An existing policy (Debian's Docker images ship one) is left alone.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod 755 "$policy"
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
fi

install_packages() {
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
}

echo "install_services.sh: installing ${packages[*]}" >&2
# The package lists are only refreshed when they are too old to know the packages.
if ! install_packages 2>/dev/null; then
    "${as_root[@]}" apt-get update -qq
    if ! install_packages; then
        echo "install_services.sh: apt-get could not install ${packages[*]}" >&2
        exit 1
    fi
fi

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || [[ ! -x /usr/sbin/nginx ]]; then
    echo "install_services.sh: installed ${packages[*]}, but initdb or nginx is still missing" >&2
    exit 1
fi
