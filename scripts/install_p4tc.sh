#!/usr/bin/env bash
# Unpack the prebuilt P4 toolchain (p4c, p4test, BMv2 simple_switch_grpc) from
# ../shared/p4tc/ into a cache folder and print its bin/ path. Idempotent: a
# tree already unpacked from the same archive is reused. P4TC_ARCHIVE and
# P4TC_HOME override the defaults. Exits 1 with one line when the archive is
# missing (the P4 tests then skip with a reason, except in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
archive=${P4TC_ARCHIVE:-../shared/p4tc/p4tc-bookworm-x86_64.tar.xz}
home=${P4TC_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/scidmz}
if [ ! -f "$archive" ]; then
  echo "install_p4tc: no toolchain archive at $archive" >&2
  exit 1
fi
stamp="$home/p4tc/.archive-stamp"
want=$(stat -c '%s-%Y' "$archive")
if [ ! -x "$home/p4tc/bin/p4c" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  mkdir -p "$home"
  rm -rf "$home/p4tc.tmp"
  mkdir -p "$home/p4tc.tmp"
  tar -xJf "$archive" -C "$home/p4tc.tmp"
  rm -rf "$home/p4tc"
  mv "$home/p4tc.tmp/p4tc" "$home/p4tc"
  rmdir "$home/p4tc.tmp"
  echo "$want" > "$stamp"
fi
echo "$home/p4tc/bin"
