"""Kernels: the array code behind the ops, one subpackage per device.

``tinytrain.kernels.cpu`` holds NumPy kernels (they are written against the array
module of their input, so most also run on CuPy arrays); ``tinytrain.kernels.cuda``
holds CUDA sources and their CuPy launchers. Subpackages are imported on demand:
importing this package never imports CuPy.
"""
