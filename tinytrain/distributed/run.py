"""``python -m tinytrain.distributed.run --nproc_per_node N script.py ARGS``: the same as
:mod:`tinytrain.distributed.launch` (torchrun's module name)."""

from __future__ import annotations

import sys

from tinytrain.distributed.launch import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m tinytrain.distributed.run"))
