#!/usr/bin/env bash
# Everything CI runs, in the order CI runs it (`.ci/run` calls this script):
#   cargo fmt --check, cargo clippy -D warnings, cargo test, build + install the Python package,
#   pytest. Works from a fresh clone on a machine with python3 (>= 3.9, with pip) and rustup.
# Environment: PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# --- toolchain -------------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "check.sh: cargo not found; install Rust with rustup" >&2; exit 1; }
if command -v rustup >/dev/null 2>&1; then
    installed=$(rustup component list --installed 2>/dev/null || true)
    for c in rustfmt clippy; do
        grep -q "^$c" <<<"$installed" || { step "rustup component add $c"; rustup component add "$c"; }
    done
fi

PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# A Python whose packages the OS manages (PEP 668) refuses pip installs: use a venv instead.
if [ -z "${VIRTUAL_ENV:-}" ] && "$PY" - <<'PYEOF'
import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)
PYEOF
then
    step "creating .venv (this Python is managed by the OS)"
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    PY=.venv/bin/python
fi

# --- Rust ------------------------------------------------------------------------------------
# Build the PyO3 crate as an extension module (no libpython link), as maturin does: no Rust test
# embeds Python, and cargo and maturin then agree on pyo3's configuration instead of rebuilding it.
export PYO3_BUILD_EXTENSION_MODULE=1
step "cargo fmt --all --check"
cargo fmt --all --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test --workspace"
cargo test --workspace

# --- Python ----------------------------------------------------------------------------------
step "pip install '.[test]' (builds the extension in release mode)"
"$PY" -m pip --version >/dev/null 2>&1 || "$PY" -m ensurepip --upgrade
# maturin >= 1.9.4 builds pyo3 0.30 extensions without the deprecated `extension-module` feature.
# pip does nothing here when a recent enough maturin is installed; --no-build-isolation below
# reuses it instead of fetching a fresh one on every run.
"$PY" -m pip install -q 'maturin>=1.9.4,<2'
"$PY" -m pip install -q --no-build-isolation '.[test]'

step "pytest"
# Run from tests/'s parent but import the installed package, not python/ (pytest's rootdir
# conftest puts tests/ first on sys.path, never python/). Exit 5 (no tests collected) fails too.
"$PY" -m pytest -q -p no:cacheprovider
