#!/bin/bash
# What a session lent a GPU machine runs there, in one call (about 3 min on an H200): the GPU tests, the GPU
# rows of the exact first stage (1, 16 and 64 queries a batch) and the AVX-512/AMX kernel tests on that
# machine's CPU. That machine has torch, numpy, h5py, scipy, numba and pytest but no network, so prepare here:
#
#   printf '/.whl/\n/.gpu/\n' >> .git/info/exclude
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl orjson==3.13.0 faiss-cpu==1.15.1
#   python -c "from momentsearch.data.synthetic import generate, load_preset
#   generate(load_preset('tiny'), '.gpu/tiny')"
#   # then one short training on .gpu/tiny (any XML config) so that features/queries_minilm.h5 holds the queries:
#   # MiniLM's weights (88 MB) are over what a call carries
#
# and call the device tool's run with command "bash benchmarks/device_check.sh" and carry [".gpu", ".whl"].
# What comes back: env.txt, gpu_tests.log, gpu_first_stage_h200_batches.json, cpu_simd_tests.log.
set -o pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src MOMENTSEARCH_TINY_BENCHMARK=$PWD/.gpu/tiny
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, numpy; print('torch', torch.__version__, torch.cuda.get_device_name(),
    'numpy', numpy.__version__)"
  lscpu | grep -E "Model name|^CPU\(s\)"
  grep -o -w 'avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo; } 2>&1 | tee "$OUT/env.txt"
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "the C extensions did not build"; exit 1; }
SECONDS=0
timeout 240 python3 -m pytest -p no:cacheprovider -m gpu tests/test_gpu.py -q 2>&1 | tee "$OUT/gpu_tests.log" | tail -4
echo "gpu tests ${SECONDS}s"; SECONDS=0
timeout 330 python3 benchmarks/gpu_first_stage.py --videos 100000 1000000 --queries 320 --batches 1 16 64 \
  --out "$OUT/gpu_first_stage_h200_batches.json" 2>&1 | tee "$OUT/bench.log" | grep -v "^{" | tail -12
echo "bench ${SECONDS}s"; SECONDS=0
timeout 240 python3 -m pytest -p no:cacheprovider -q -rs tests/test_small_linear.py tests/test_dropout.py \
  tests/test_fastscan.py tests/test_scan_i8_pass.py tests/test_scan_rows8.py tests/test_scan_stage.py 2>&1 \
  | tee "$OUT/cpu_simd_tests.log" | tail -12
echo "simd tests ${SECONDS}s"
