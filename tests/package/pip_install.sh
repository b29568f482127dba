#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment that sees the project's torch (.venv's
# site-packages through a .pth file), then a job of one trains with the installed package
# from outside the source tree: its loss must fall.
#   tests/package/pip_install.sh BUILD_DIR SOURCE_DIR
# BUILD_DIR is reused (POSEIDON_BUILD_DIR), so the extension is not compiled twice.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python=${PYTHON:?set PYTHON to the python with torch}
"$python" -m venv --without-pip "$tmp/env"
"$python" -c "import site; print(site.getsitepackages()[0])" > "$("$tmp/env/bin/python" -c "import site; print(site.getsitepackages()[0])")/project.pth"
cd "$tmp"
POSEIDON_BUILD_DIR="$build" "$tmp/env/bin/python" -m pip install --no-build-isolation --no-deps --no-index -q "$src" \
  > "$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
env -u PYTHONPATH "$tmp/env/bin/python" - <<'PY'
import torch
import poseidon

assert poseidon.__file__.startswith(__import__("sys").prefix), f"imported {poseidon.__file__}, not the installed copy"
poseidon.init()
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
model = poseidon.DistributedModel(net, opt)
x = torch.randn(256, 20)
y = (x[:, :4] * 3).argmax(1)
losses = []
for _ in range(40):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
model.close()
print(f"installed at {poseidon.__file__}: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
assert losses[-1] < 0.5 * losses[0], "the installed package did not train (loss did not fall by half)"
PY
