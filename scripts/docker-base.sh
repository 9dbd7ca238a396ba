#!/usr/bin/env bash
# Make a Python 3.11 base image from Debian's own packages, for machines that cannot pull images
# from a registry (the official python:3.11-slim stays the Dockerfiles' default BASE_IMAGE).
#   bash scripts/docker-base.sh    # prints the image name, ragblend-base:bookworm-<package hash>
# The debootstrap tarball is cached under $RAGBLEND_DOCKER_CACHE (default /var/cache/ragblend),
# so later runs only `docker import` it, and nothing at all when the image already exists.
set -euo pipefail

cache="${RAGBLEND_DOCKER_CACHE:-/var/cache/ragblend}"
mirror="${RAGBLEND_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What python:3.11-slim has: python3-venv brings ensurepip (a venv with pip), python3-dev the
# headers that torch's inductor needs to compile vLLM's CPU kernels at run time.
packages="python3,python3-venv,python3-dev,ca-certificates"
flavour="bookworm-$(echo "$packages" | sha256sum | cut -c1-12)"
tarball="$cache/debian-$flavour.tar"
image="ragblend-base:$flavour"

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || {
    echo "docker-base: installing debootstrap" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
  }
  mkdir -p "$cache"
  root="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  echo "docker-base: debootstrap bookworm into $root (once, about 2 minutes)" >&2
  debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" >&2
  # A smaller image: no package lists or caches; the Dockerfiles run apt-get update themselves.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi

echo "docker-base: importing $tarball as $image" >&2
docker import \
  --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  "$tarball" "$image" >&2
echo "$image"
