#!/usr/bin/env bash
# Sourced by the tools (`. tools/lib/build.bash`), not run on its own.
# Promises: a failed `swift build` stops the tool that asked for it, with
# the build's whole output on stderr, so no tool ever goes on to run a stale
# binary. groser_build runs `swift build ARGS...` with its output in a
# temporary log; when the build fails it prints the log and exits the
# calling script with status 1; when it succeeds it prints the log without
# the progress lines ("[12/340] Compiling ...").
#   groser_build [--quiet] [--stderr] [--filter ERE]... [--] SWIFT-BUILD-ARGS...
# --quiet prints nothing on success; --stderr prints it to stderr instead of
# stdout; --filter drops further lines matching ERE on success (known noise).
# Call it as a plain command, not inside $(...): its exit ends the script.

groser_build() {
  local quiet=false fd=1 filter='^\['
  while [ $# -gt 0 ]; do
    case "$1" in
      --quiet) quiet=true; shift ;;
      --stderr) fd=2; shift ;;
      --filter) filter="$filter|$2"; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  local log status=0
  log=$(mktemp "${TMPDIR:-/tmp}/groser-build-XXXXXX")
  swift build "$@" >"$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    {
      echo "== swift build $* failed (exit status $status); its output:"
      cat "$log"
      echo "== swift build failed: stopping (no stale binary is run)"
    } >&2
    rm -f "$log"
    exit 1
  fi
  if ! $quiet; then
    # grep's status 1 only means every line was filtered out.
    grep -v -E "$filter" "$log" >&"$fd" || [ $? -eq 1 ]
  fi
  rm -f "$log"
}
