# Call 1 (session 8): the GEMV kernels after their accumulation body was written once
# (kernels/mxint8/linear_gemv.py _add_block): every path and config timed as in session 7's
# call5-final, with the bit-exactness check of the GEMV kernels on every (v, e) pair.
set -u
R=/tmp/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $R/gpu.txt
python3 -c "import torch, triton, pytest; print(torch.__version__, triton.__version__, pytest.__version__)" >> $R/gpu.txt
start=$(date +%s)
PYTHONPATH=$PWD timeout 400 python3 tools/mxint8_paths_gpu.py --out $R/paths.json --passes 3 > $R/paths.log 2>&1
echo "paths exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
cp $R/* $OUT/
