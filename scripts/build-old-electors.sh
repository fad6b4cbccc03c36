#!/usr/bin/env bash
# Builds the elector binary of older commits, for the mixed-version tests
# (elector/tests/mixed_versions.rs, docs/protocol.md §3.8):
#   scripts/build-old-electors.sh [COMMIT...]
# With no argument it builds the three older electors the tests run:
#   222ffcb~1  the Legacy form (reads neither HB's floors nor OFFER's
#              `forced`; also older than the replication gate),
#   2890e2e~1  reads the floors and `forced` but sends no flag F (so it is
#              sent the Legacy form); drops an OFFER with `led`,
#   dc9c913    the Floors form (F but not P: OFFER has `forced`, not `led`).
# Each binary lands in $OLD_ELECTORS_DIR/<short-sha>/elector (default
# <repo>/target/old-electors), the short sha being `git rev-parse --short=7`.
# A commit whose binary is already there is skipped, so the script is cheap
# to run again. The build happens in a detached worktree in a temp dir (the
# caller's tree is never touched) with its own CARGO_TARGET_DIR under the
# cache, shared by the old commits (they share most dependencies) and kept
# apart from the repo's target dir so the current build is not clobbered.
# `just mixed-versions` runs this, then the tests.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
cache=${OLD_ELECTORS_DIR:-$repo/target/old-electors}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

if [ $# -eq 0 ]; then
  set -- 222ffcb~1 2890e2e~1 dc9c913
fi

for commit in "$@"; do
  sha=$(git -C "$repo" rev-parse --verify --short=7 "$commit^{commit}") || {
    echo "build-old-electors: ERROR: $commit is not a commit of this repository (a shallow clone? fetch the full history)" >&2
    exit 1
  }
  out="$cache/$sha/elector"
  if [ -x "$out" ]; then
    echo "build-old-electors: $commit ($sha): $out already built"
    continue
  fi
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/old-elector-$sha.XXXXXX")
  # The worktree must go even when the build fails.
  trap 'git -C "$repo" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  echo "build-old-electors: $commit ($sha): building in $tmp/src"
  git -C "$repo" worktree add --detach "$tmp/src" "$sha" >/dev/null
  (cd "$tmp/src" && CARGO_TARGET_DIR="$cache/.cargo-target" nice -n 10 cargo build --release --locked -p elector)
  mkdir -p "$cache/$sha"
  cp "$cache/.cargo-target/release/elector" "$out.tmp"
  mv "$out.tmp" "$out"
  git -C "$repo" worktree remove --force "$tmp/src"
  rm -rf "$tmp"
  trap - EXIT
  echo "build-old-electors: $commit ($sha): $out"
done
