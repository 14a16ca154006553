#!/usr/bin/env bash
# Fails if libkeplershm.so.1 is ABI-incompatible with the committed baseline (libabigail's abidiff).
# Additions (new functions, new enum values) pass. An intended break needs an ABI major bump (soname,
# KEPLERSHM_ABI_MAJOR, version script) and a new baseline:
#   abidw --no-corpus-path --exported-interfaces-only --headers-dir libkeplershm/include --drop-private-types \
#         --out-file libkeplershm/abi/libkeplershm.so.1.abi build/lib/libkeplershm.so.1
set -uo pipefail
baseline=$1 library=$2 headers=$3
abidiff --headers-dir2 "$headers" "$baseline" "$library"
rc=$?
# abidiff's exit code is a bit set: 1 error, 2 usage error, 4 ABI change, 8 incompatible ABI change.
if (( rc & 3 )); then echo "check_abi: abidiff failed (exit $rc)"; exit 1; fi
if (( rc & 8 )); then echo "check_abi: INCOMPATIBLE change against the committed baseline"; exit 1; fi
if (( rc & 4 )); then echo "check_abi: compatible additions; consider refreshing the baseline"; fi
echo "check_abi: compatible with $baseline"
