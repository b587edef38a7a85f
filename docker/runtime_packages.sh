#!/bin/sh
# Prints the distribution packages that hold the shared libraries BINARY needs (ldd), one per line, so
# that the runtime stage installs exactly those. Names differ between bases (Debian 12: libjpeg62-turbo,
# libpng16-16; Ubuntu 24.04: libjpeg-turbo8, libpng16-16t64), so they are looked up, not written down.
# glibc and the compiler runtime are left out: every base has them (libstdc++ is linked statically anyway).
# Then the packages of the programs train runs itself in script mode, whose names every Debian and Ubuntu
# release shares: python3 (the user's program), python3-pip (its requirements) and python3-boto3 (the code
# fetched from S3: entrypoint/user_code/fetch_code.py).
set -eu
binary="${1:?usage: runtime_packages.sh BINARY}"
ldd "$binary" | awk '/=> \// { print $3 }' | while read -r library; do
  # dpkg knows a file by the path its package shipped: try the path ldd gave (merged /usr may differ)
  # and the file it resolves to (OpenBLAS is reached through /etc/alternatives).
  for path in "$library" "$(readlink -f "$library")" "/usr$library"; do
    if owner="$(dpkg -S "$path" 2>/dev/null)"; then
      printf '%s\n' "$owner" | grep -v '^diversion' | head -n 1 | cut -d: -f1
      break
    fi
  done
done | sort -u | grep -v -x -E 'libc6|libgcc-s1|libstdc\+\+6' || true
printf '%s\n' python3 python3-pip python3-boto3
