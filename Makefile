# Two commands on a fresh machine: `make demo` (the main job) and `make test`.
# Each creates .venv and installs what it needs; torch==2.13.0 (the CPU wheel on disk) goes in first
# so that nothing later can pull a CUDA build.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench clean

$(STAMP): pyproject.toml setup.py $(wildcard src/momentsearch/search/_fastscan*) $(wildcard src/momentsearch/text/_linear*) $(wildcard src/momentsearch/models/_dropout*)
	@# WordNet 3.0 for the synset and METEOR proxies: Debian's wordnet-base (needs root and apt)
	@test -f /usr/share/wordnet/data.noun || apt-get install -y -q wordnet-base >/dev/null \
	  || (apt-get update -q >/dev/null && apt-get install -y -q wordnet-base >/dev/null) \
	  || echo "warning: could not install wordnet-base; the synset and METEOR proxies will be unavailable"
	@# the page's browser test drives Debian's chromium (Playwright's own browser download cannot work offline)
	@command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null \
	  || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null) \
	  || echo "warning: could not install chromium; the page's browser test will be skipped"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[models,text,test,video,service,ray,speech]"
	@# tests only: PyPI's torchvision and open_clip beside the venv (not in it: that torchvision is a CUDA build and
	@# breaks imports next to the CPU torch); tests/test_vision_backends.py runs them through tests/vision_shim
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --target $(VENV)/vision-extra \
	  torchvision==0.28.0 open_clip_torch==3.3.0 ftfy wcwidth || echo "warning: no side install of torchvision/open_clip"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/momentsearch demo --out runs/demo

# two worker processes (pytest-xdist), a module's tests in one of them (--dist loadfile), so module fixtures are built
# once and one Milvus server and one local Ray run at a time; a bare `pytest` runs in one process
test: setup
	MOMENTSEARCH_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: setup
	$(BIN)/python benchmarks/eval_speed.py
	$(BIN)/python benchmarks/generate_speed.py

clean:
	rm -rf $(VENV) runs .pytest_cache
