#!/usr/bin/env bash
# Compiles the BPF C under bpf/ into the Go packages that embed it: go generate
# in every package with a bpf2go directive (clang-14, llvm-strip-14; see
# hack/install-deps.sh). With --check it fails when that changed a generated
# file, naming it, so the committed objects are known to be what the sources
# give (bpf2go's output is byte-identical run to run); the regenerated files
# stay in place, ready to commit.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t dirs < <(grep -rl --include='*.go' '^//go:generate go tool bpf2go' internal | xargs -r -n1 dirname | sort -u)
if [ ${#dirs[@]} -eq 0 ]; then
  echo "bpf-generate: no package with a bpf2go directive" >&2
  exit 1
fi
sums() { find "${dirs[@]}" -maxdepth 1 \( -name '*_bpfe[lb].go' -o -name '*_bpfe[lb].o' \) -print0 | sort -z | xargs -0 sha256sum; }

before=$(sums)
for d in "${dirs[@]}"; do
  go generate "./$d"
done
if [ "${1:-}" = --check ]; then
  after=$(sums)
  if [ "$before" != "$after" ]; then
    echo "bpf-generate: generated BPF files were stale (now regenerated; commit them):" >&2
    diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
    exit 1
  fi
fi
