#!/usr/bin/env bash
# Runs the lock benchmarks and prints them with a table of ratios.
# COUNT and BENCHTIME override -count and -benchtime.
set -euo pipefail
cd "$(dirname "$0")"
go test -run '^$' -bench . -benchmem -count "${COUNT:-3}" -benchtime "${BENCHTIME:-1s}" . | go run ./cmd/benchtable
