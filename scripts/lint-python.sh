#!/usr/bin/env bash
# Ruff over every Python file of the project, from the cached `tools` venv
# (built on first use by setup-python-env.sh).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$(bash "$repo_root/scripts/setup-python-env.sh" tools)"
cd "$repo_root"
exec "$(dirname "$python")/ruff" check --quiet .
