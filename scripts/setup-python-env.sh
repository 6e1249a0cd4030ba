#!/usr/bin/env bash
# Build, once, the virtualenvs the test suite runs the real Python libraries in,
# one per target library (they cannot share one: verifiers 0.4, verifiers 0.3.1
# and openenv 0.10 have no common resolution), and print their interpreters.
# Installing takes minutes, so each venv is cached and reused until its
# requirements file (python/requirements/TARGET.txt) changes.
#
#   scripts/setup-python-env.sh [TARGET ...]   (default: every target)
#
#   GATEKEPT_VENV_ROOT          where the venvs live (default: ~/.cache/gatekept/venvs)
#   GATEKEPT_PYTHON_BOOTSTRAP   interpreter that creates them (default: python3; 3.11 to 3.13)
#
# stdout carries only the interpreter paths, one a target in the order asked;
# progress goes to stderr.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements_dir="$repo_root/python/requirements"
venv_root="${GATEKEPT_VENV_ROOT:-$HOME/.cache/gatekept/venvs}"
bootstrap="${GATEKEPT_PYTHON_BOOTSTRAP:-python3}"
stamp_name=".gatekept-requirements.sha256"

log() { printf 'setup-python-env: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

build_target() {
  local target="$1"
  local requirements="$requirements_dir/$target.txt"
  local venv="$venv_root/$target"
  [[ -f "$requirements" ]] || die "missing $requirements"
  want="$(sha256_of "$requirements")"

  # The fast path runs no Python at all, so a warm run costs milliseconds.
  if [[ -x "$venv/bin/python" && -f "$venv/$stamp_name" ]] && [[ "$(<"$venv/$stamp_name")" == "$want" ]]; then
    printf '%s\n' "$venv/bin/python"
    return 0
  fi

  command -v "$bootstrap" >/dev/null 2>&1 ||
    die "interpreter '$bootstrap' not found; install Python 3.11 to 3.13 or set GATEKEPT_PYTHON_BOOTSTRAP"
  version="$("$bootstrap" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' </dev/null)" ||
    die "'$bootstrap' does not run"
  # The bounds are verifiers' own (Requires-Python >=3.11,<3.14).
  "$bootstrap" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' </dev/null ||
    die "'$bootstrap' is Python $version; verifiers needs Python 3.11 to 3.13 (set GATEKEPT_PYTHON_BOOTSTRAP)"
  "$bootstrap" -c 'import venv, ensurepip' </dev/null 2>/dev/null ||
    die "'$bootstrap' lacks the venv/ensurepip modules (on Debian: apt-get install python3-venv)"

  parent="$(dirname "$venv")"
  mkdir -p "$parent"
  # Leftovers of interrupted builds; recent ones may belong to a build still running.
  find "$parent" -maxdepth 1 -name "$(basename "$venv").tmp.*" -mmin +120 -exec rm -rf {} + 2>/dev/null || true

  # Building beside the target and renaming it into place means an interrupted
  # install never leaves a directory that passes the stamp check above.
  tmp="$(mktemp -d "$venv.tmp.XXXXXX")"
  child=""
  cleanup() {
    # An interrupted pip would otherwise keep writing into the directory being removed.
    # The whole group: ensurepip and pip start children of their own.
    if [[ -n "$child" ]]; then kill -TERM -- "-$child" 2>/dev/null || kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
    rm -rf "$tmp"
  }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # Runs a step in the background, in a process group of its own, so a
  # signal reaches the trap at once and the trap can stop all of the step.
  step() {
    setsid "$@" </dev/null >&2 &
    child=$!
    local rc=0
    wait "$child" || rc=$?
    child=""
    return "$rc"
  }

  started=$SECONDS
  log "building $target at $venv with Python $version (a first build of every target takes about twenty minutes)"
  log "$target installs: $(grep -v '^[[:space:]]*#' "$requirements" | grep -v '^[[:space:]]*$' | tr '\n' ' ')"
  step "$bootstrap" -m venv --prompt "$(basename "$venv")" "$tmp"
  step "$tmp/bin/python" -m pip install --disable-pip-version-check --no-input --quiet -r "$requirements"

  # Scripts and activate files record the directory they were built in; point
  # them at the final location before the rename makes the venv visible.
  "$tmp/bin/python" - "$tmp" "$venv" <<'PY' >&2
import pathlib, sys
old, new = sys.argv[1], sys.argv[2]
root = pathlib.Path(old)
for path in [root / "pyvenv.cfg", *(root / "bin").iterdir()]:
    if not path.is_file() or path.is_symlink():
        continue
    data = path.read_bytes()
    if old.encode() in data:
        path.write_bytes(data.replace(old.encode(), new.encode()))
PY
  printf '%s\n' "$want" >"$tmp/$stamp_name"

  if [[ -e "$venv" ]]; then
    stale="$(mktemp -d "$venv.stale.XXXXXX")"
    mv "$venv" "$stale/"
    mv "$tmp" "$venv"
    rm -rf "$stale"
  else
    mv "$tmp" "$venv"
  fi
  trap - EXIT

  log "$target ready in $((SECONDS - started))s"
  printf '%s\n' "$venv/bin/python"
}

if [[ $# -eq 0 ]]; then
  set -- $(cd "$requirements_dir" && ls -- *.txt | sed 's/\.txt$//')
fi
for target in "$@"; do
  [[ -f "$requirements_dir/$target.txt" ]] ||
    die "unknown target '$target' (known: $(cd "$requirements_dir" && ls -- *.txt | sed 's/\.txt$//' | tr '\n' ' '))"
done

# One target: built here, in the foreground (the linters' tools venv on every npm test).
if [[ $# -eq 1 ]]; then
  (build_target "$1")
  exit 0
fi

# Several: built side by side, since pip spends most of a build downloading;
# a subshell per target keeps each build's traps and temporary directory its
# own. Their interpreters are printed in the order asked once all are built.
outputs="$(mktemp -d)"
pids=()
heartbeat=""
stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "$heartbeat" ]] && kill "$heartbeat" 2>/dev/null || true
  rm -rf "$outputs"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
position=0
for target in "$@"; do
  (build_target "$target") >"$outputs/$position" &
  pids+=("$!")
  position=$((position + 1))
done
# A word every minute while a build runs: a first build takes about twenty minutes.
(
  started=$SECONDS
  while sleep 60; do log "still building ($((SECONDS - started))s so far)"; done
) &
heartbeat=$!
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
kill "$heartbeat" 2>/dev/null || true
heartbeat=""
((failed == 0)) || die "a virtualenv could not be built (see above)"
for ((index = 0; index < position; index++)); do cat "$outputs/$index"; done
