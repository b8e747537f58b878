"""The CPU kernel set: NumPy kernels on raw arrays (chapter 3: ``notebooks/03_conv2d_cpu.ipynb``).

* :mod:`tinytrain.kernels.cpu.conv2d`: the direct convolution and its three backward ops;
* :mod:`tinytrain.kernels.cpu.pool`: max and average pooling, forward and backward;
* :mod:`tinytrain.kernels.cpu.layers`: ReLU, dropout, linear, cross-entropy;
* :mod:`tinytrain.kernels.cpu.optim`: the SGD and Adam updates.

:mod:`tinytrain.kernels.cuda` exports the same names for arrays on the GPU;
``tinytrain.kernels.for_array(x)`` picks the set.
"""

from tinytrain.kernels.cpu.conv2d import (
    conv2d_backward,
    conv2d_backward_bias,
    conv2d_backward_input,
    conv2d_backward_weight,
    conv2d_forward,
)
from tinytrain.kernels.cpu.layers import (
    cross_entropy_backward,
    cross_entropy_forward,
    dropout_backward,
    dropout_forward,
    linear_backward,
    linear_forward,
    relu_backward,
    relu_forward,
)
from tinytrain.kernels.cpu.optim import adam_step, sgd_step
from tinytrain.kernels.cpu.pool import (
    avg_pool2d_backward,
    avg_pool2d_forward,
    max_pool2d_backward,
    max_pool2d_forward,
)
from tinytrain.kernels.shapes import Conv2dMeta, Pool2dMeta

__all__ = [
    "KERNELS", "Conv2dMeta", "Pool2dMeta",
    "adam_step", "avg_pool2d_backward", "avg_pool2d_forward", "conv2d_backward",
    "conv2d_backward_bias", "conv2d_backward_input", "conv2d_backward_weight",
    "conv2d_forward", "cross_entropy_backward", "cross_entropy_forward", "dropout_backward",
    "dropout_forward", "linear_backward", "linear_forward", "max_pool2d_backward",
    "max_pool2d_forward", "relu_backward", "relu_forward", "sgd_step",
]

#: The functions every kernel set provides (a test checks that the CUDA set has them all).
KERNELS = tuple(name for name in __all__ if name[0].islower())
