# tinytrain: every target creates .venv on first use, installs the package
# (editable), then runs inside it. Only Python 3.10+ is needed. `make train` installs
# just the runtime (NumPy, tqdm, matplotlib, threadpoolctl); test, lab and bench add
# the dev extra (pytest, nbval, JupyterLab, PyTorch as the reference, ...).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RUNTIME := $(VENV)/.installed-runtime
STAMP  := $(VENV)/.installed-dev
# Full MNIST for the tests and the main job: ../shared/data when it exists
# (the course repository's layout), else whatever the user exported.
SHARED_DATA := $(abspath ../shared/data)
export TINYTRAIN_DATA ?= $(if $(wildcard $(SHARED_DATA)/mnist),$(SHARED_DATA),)
export MPLBACKEND ?= Agg

.PHONY: help train test lint lab notebooks check-exercises book book-check bench bench-gpu doctor clean

help:
	@echo "make train   train the default MNIST CNN (creates .venv on first use)"
	@echo "make test    ruff + pytest + every notebook under nbval"
	@echo "make lab     open JupyterLab on the course (notebooks/, exercises/)"
	@echo "make notebooks  rewrite every .ipynb (and exercises/) from the chapter sources"
	@echo "make check-exercises [CH=03]  run your exercise copies and report each answer"
	@echo "make book [CH=\"0 3\"]  execute every chapter into a web site: build/book/index.html"
	@echo "make book-check  check build/book (the whole book): every chapter ran, figures, links"
	@echo "make bench   run the CPU benchmarks against PyTorch (make bench-gpu: the GPU ones)"
	@echo "make doctor  what this machine can run"

$(RUNTIME): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else \
		"tinytrain needs Python 3.10+, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { echo "could not create $(VENV): \
		install your Python's venv module (Debian/Ubuntu: apt install python3-venv)"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

train: $(RUNTIME)
	$(PY) -m tinytrain.train $(ARGS)

# Two processes (pytest-xdist), each test file and notebook whole on one of them (its cells in
# order, in one kernel): 16 min instead of 24 on a 2-core machine. TEST_JOBS=0: one process.
TEST_JOBS ?= 2
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest --nbval-lax -p no:cacheprovider -n $(TEST_JOBS) --dist loadfile \
		tests notebooks $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .

lab: $(STAMP)
	MPLBACKEND=module://matplotlib_inline.backend_inline $(PY) -m jupyter lab \
		$(if $(filter 0,$(shell id -u)),--allow-root)

notebooks: $(STAMP)
	$(PY) tools/sync_notebooks.py
	$(PY) tools/make_exercises.py

check-exercises: $(STAMP)
	$(PY) tools/check_exercises.py $(CH)

# Executes every chapter (a few minutes: chapter 6 trains on full MNIST when it is there),
# renders it to build/book/, then checks the pages; CH="0 3" makes a book of those chapters.
book: $(STAMP)
	$(PY) tools/make_book.py $(CH)

book-check: $(STAMP)
	$(PY) tools/make_book.py --check

# The GPU benchmarks need CuPy, a GPU and a CUDA build of PyTorch; bench/ddp.py needs mpiexec
# (bench/ddp.py --backend nccl for GPUs). tools/gpu_session.sh runs the GPU ones on a GPU machine.
CPU_BENCH := bench/conv_cpu.py bench/mnist_cpu.py bench/dataloader.py bench/op_overhead.py \
	bench/rnn_cpu.py bench/ops_cpu.py \
	bench/ddp.py
GPU_BENCH := bench/conv_gpu.py bench/mnist_gpu.py

bench: $(STAMP)
	for b in $(CPU_BENCH); do $(PY) $$b || exit 1; done

bench-gpu: $(STAMP)
	for b in $(GPU_BENCH); do $(PY) $$b || exit 1; done

doctor: $(RUNTIME)
	$(PY) -m tinytrain.doctor

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build *.egg-info
