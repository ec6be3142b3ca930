"""Build the ReLU custom-op library, as the Neuron tutorial's build.py does: writes librelu.so to the current folder.

python -m neuron_emu run build.py    (on a Trn1/Inf2 instance with torch-neuronx: python build.py)
"""

import os

import torch_neuronx  # noqa: F401  (imported first, as in the tutorial; neuron_emu's stand-in under the runner)
from torch_neuronx.xla_impl import custom_op

HERE = os.path.dirname(os.path.abspath(__file__))

library = custom_op.load(
    name="relu",
    compute_srcs=[os.path.join(HERE, "relu.cpp")],
    shape_srcs=[os.path.join(HERE, "shape.cpp")],
    build_directory=os.getcwd(),
    multicore=False,
)
print(f"built {library}")
