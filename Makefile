# The two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed-stamp

.PHONY: demo test lint format test-all test-hpc bench clean

# the tests start some hundreds of Python processes (clusters' workers, commands): each reads the
# modules compiled once instead of compiling them again, wherever PYTHONDONTWRITEBYTECODE is set
unexport PYTHONDONTWRITEBYTECODE

# pip writes the installed modules' bytecode one file at a time; compileall writes it on every core
# (the same files, in half the time: torch alone is thousands of modules)
$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test,torch]' || \
	  { $(BIN)/python -m pip install --quiet --no-compile -e '.[test]' && \
	    echo "note: the torch extra (torch==2.13.0) did not install here: the real-training tests will skip"; }
	$(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null || true
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/taskflow schedule examples/heft_paper.graph.json --cluster examples/heft_paper.cluster.json --scheduler all -q
	$(BIN)/taskflow demo -o taskflow-out
	@echo "the taskflow command is in $(VENV): '. $(VENV)/bin/activate' puts it on your PATH (taskflow --help)"

# the suite a new user runs: everything but the long runs (slow), the network testbed (root) and SLURM;
# in TEST_JOBS processes (most tests wait on Dask clusters, so two share two cores well)
TEST_JOBS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal -m "not slow and not testbed and not hpc"

# the linter over the tree (pyproject.toml says what it checks): unused and undefined names, syntax;
# and the formatter's check (make format formats)
LINTED = taskflow schedulers workflows tests benchmarks conftest.py
lint: $(VENV)/.lint-stamp
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: $(VENV)/.lint-stamp
	$(BIN)/ruff format $(LINTED)

$(VENV)/.lint-stamp: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[lint]'
	touch $@

# a real one-node SLURM (needs root): install and start it, run the HPC tests, stop it whatever happened
test-hpc: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,hpc]'
	bash tests/hpc/slurm_up.sh up
	status=0; \
	$(BIN)/python -m pytest -q tests/hpc || status=1; \
	$(BIN)/python -m pytest -q tests/project/test_doc_commands.py -k "hpc.md" || status=1; \
	bash tests/hpc/slurm_up.sh down; exit $$status

# the whole suite: make test's tests, the long runs, the testbed where root allows, the tests of
# ../shared/data where it is beside the checkout (SLURM's tests skip unless one runs: make test-hpc);
# in TEST_JOBS processes but for the testbed's tests, which shape links and time runs on them: those
# run after, one at a time
test-all: $(STAMP) $(VENV)/.notebook-stamp
	status=0; \
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal -m "not testbed" || status=1; \
	$(BIN)/python -m pytest -q -m testbed || status=1; \
	exit $$status

# what the notebook's test needs (a Jupyter kernel), for make test-all only
$(VENV)/.notebook-stamp: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,notebook]'
	touch $@

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_model.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
