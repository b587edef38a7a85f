#!/usr/bin/env bash
# Makes (once) the Debian bookworm root file system that the container test imports as its base image:
# no registry can be reached here (docs/architecture.md, "Containers on a machine without Docker"), so the base comes from debootstrap and apt's own mirror.
# Usage: make_base_rootfs.sh CACHE_DIR  -> prints the path of CACHE_DIR/bookworm-minbase.tar
# The tarball is reused when present: debootstrap takes minutes, the tarball never changes meaning.
set -euo pipefail

cache_dir="${1:?usage: make_base_rootfs.sh CACHE_DIR}"
tarball="$cache_dir/bookworm-minbase.tar"
if [ -s "$tarball" ]; then
  echo "$tarball"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "make_base_rootfs: debootstrap is missing (scripts/setup.sh installs it)" >&2; exit 1; }

mkdir -p "$cache_dir"
rootfs="$(mktemp -d "$cache_dir/rootfs.XXXXXX")"
partial="$(mktemp "$cache_dir/bookworm-minbase.tar.XXXXXX")"
cleanup() {
  # debootstrap mounts proc and sys inside the root file system; a failed run can leave them mounted, and
  # rm -rf must never walk into them.
  local mounted
  for mounted in "$rootfs/dev/pts" "$rootfs/sys" "$rootfs/proc"; do
    if mountpoint -q "$mounted" 2>/dev/null; then umount -l "$mounted" || true; fi
  done
  rm -rf --one-file-system -- "$rootfs" "$partial"
}
trap cleanup EXIT

mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
echo "make_base_rootfs: debootstrap --variant=minbase bookworm from $mirror (a few minutes, once)" >&2
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >&2
# Slim it the way Docker's debian images are: no package lists or downloaded .debs in the base.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
tar -C "$rootfs" -cf "$partial" .
chmod 644 "$partial"
mv "$partial" "$tarball"   # whole or absent: a killed run leaves no half tarball behind
echo "$tarball"
