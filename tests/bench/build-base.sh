#!/usr/bin/env bash
# Build the baseline daemon of `make bench`'s A/B rows: the commit named in
# tests/bench/baseline-ref (or BENCH_BASE), checked out as a detached worktree
# under build/bench/base-src and built there with its own Makefile. Prints the
# path of its ci-daemon. Reuses the build when the worktree is at that commit.
set -euo pipefail
cd "$(dirname "$0")/../.."
ref=${BENCH_BASE:-$(grep -v '^#' tests/bench/baseline-ref | head -n 1 | tr -d ' \n')}
commit=$(git rev-parse --verify --quiet "$ref^{commit}") || {
	echo "build-base: $ref is not a commit of this repository" >&2
	exit 2
}
src=build/bench/base-src
if [[ -d $src ]] && [[ $(git -C "$src" rev-parse HEAD 2>/dev/null) != "$commit" ]]; then
	git worktree remove --force "$src" >/dev/null 2>&1 || rm -rf "$src"
	git worktree prune
fi
git worktree prune
if [[ ! -d $src ]]; then
	mkdir -p build/bench
	git worktree add --detach "$src" "$commit" >/dev/null 2>&1
fi
make -s -C "$src" all >&2
echo "$src/build/ci-daemon"
