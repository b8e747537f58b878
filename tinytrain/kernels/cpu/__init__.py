"""CPU kernels on raw NumPy arrays (chapter 3: ``notebooks/03_conv2d_cpu.ipynb``).

* :mod:`tinytrain.kernels.cpu.conv2d`: ``Conv2dMeta``, the direct convolution and its
  three backward ops;
* :mod:`tinytrain.kernels.cpu.pool`: max and average pooling, forward and backward.
"""

from tinytrain.kernels.cpu.conv2d import (
    Conv2dMeta,
    conv2d_backward_bias,
    conv2d_backward_input,
    conv2d_backward_weight,
    conv2d_forward,
)
from tinytrain.kernels.cpu.pool import (
    Pool2dMeta,
    avg_pool2d_backward,
    avg_pool2d_forward,
    max_pool2d_backward,
    max_pool2d_forward,
)

__all__ = [
    "Conv2dMeta",
    "Pool2dMeta",
    "avg_pool2d_backward",
    "avg_pool2d_forward",
    "conv2d_backward_bias",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "conv2d_forward",
    "max_pool2d_backward",
    "max_pool2d_forward",
]
