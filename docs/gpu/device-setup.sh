# Sourced at the start of every device call: fla-core from carried wheels, specmem from the tree.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
rm -rf /tmp/pkg && mkdir -p /tmp/pkg/specmem && cp -r host/* /tmp/pkg/specmem/
for d in golden rtl sim; do ln -s "$PWD/$d" /tmp/pkg/specmem/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
python3 -c "import torch,triton,fla;print('torch',torch.__version__,'triton',triton.__version__,'fla',fla.__version__,torch.cuda.get_device_name())"
