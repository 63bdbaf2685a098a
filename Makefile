# Two entry points (see README): `make demo` runs the main job end to end on the
# embedded defaults; `make test` runs lint, types and the whole test suite, after
# `test-deps` has installed and started what the tests need outside Python.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-deps lint typecheck pytest bench bench-formats clean cli-docs bytecode

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The project's own modules compiled once: a shell with PYTHONDONTWRITEBYTECODE set
# (containers, CI) would otherwise compile them in every command, about 0.25 s of each
# command's start on 2 cores. Up-to-date files are skipped.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q src >/dev/null

demo: $(STAMP) bytecode
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright ingest samples/corpus
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright status
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright search "Should I drain all queued work during shutdown?" --k 3
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright eval run samples/eval/cases.jsonl --type runbook --type note --report
	@# The sample set holds 5 unsupported questions, fewer than the 20 a trustworthy
	@# recommendation needs: --force shows the workflow anyway, and --write persists it.
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright eval calibrate samples/eval/cases.jsonl --type runbook --type note --force --write
	@# The embedded model answers in the quoted style: the evidence sentences it selects,
	@# verbatim; the calibrated answerability gate decides whether the evidence answers.
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright ask "Should I drain all queued work during shutdown?"
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright ask "How long does a refund take to show up?" --type note
	@# Without a model: the most relevant sentences, labelled as not an answer.
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright ask "What happens to unfinished jobs when the shutdown deadline expires?" --style evidence
	@# The persisted thresholds (retrieval and answerability) stop an unsupported question:
	@# no eligible evidence, or insufficient, and no model call.
	RAGWRIGHT_HOME=.ragwright/demo $(BIN)/ragwright ask "How do I rotate the database password?" --type runbook --type note
	@echo
	@echo "The demo's index lives in .ragwright/demo; to go on with it:"
	@echo "  export RAGWRIGHT_HOME=$(CURDIR)/.ragwright/demo"
	@echo "  $(BIN)/ragwright status"
	@echo "The local model stays loaded for the next ask for 10 idle minutes"
	@echo "(RAGWRIGHT_CHAT_KEEP_WARM); '$(BIN)/ragwright model stop' ends it now."

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# Outside Python the tests need Chromium (the HTML report renders in it) and a Redis
# server on loopback (the shared cache and capacity pool); both come from Debian
# packages. Each step does nothing when it is already satisfied, and says one line
# when it acts.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
REDIS_DIR := $(CURDIR)/.ragwright/redis
REDIS_PORT ?= 6379
# The machine's PostgreSQL on loopback (trust authentication); tests make and drop their
# own schemas in it.
POSTGRES_URL ?= postgresql://postgres@127.0.0.1:5432/postgres
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq -o=Dpkg::Use-Pty=0

test-deps:
	@missing=""; \
	  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	    || missing="$$missing chromium"; \
	  command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	  command -v tesseract >/dev/null 2>&1 || missing="$$missing tesseract-ocr tesseract-ocr-eng"; \
	  if [ -n "$$missing" ]; then \
	    echo "test-deps: installing$$missing (apt-get)"; \
	    mkdir -p .ragwright; \
	    { $(SUDO) apt-get update -qq && $(APT_INSTALL) $$missing; } >.ragwright/apt.log 2>&1 \
	      || { cat .ragwright/apt.log; exit 1; }; \
	  fi
	@if ! redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping >/dev/null 2>&1; then \
	  echo "test-deps: starting redis-server on 127.0.0.1:$(REDIS_PORT) (log in $(REDIS_DIR))"; \
	  mkdir -p $(REDIS_DIR); \
	  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port $(REDIS_PORT) --save "" \
	    --appendonly no --dir $(REDIS_DIR) --logfile $(REDIS_DIR)/redis-$(REDIS_PORT).log \
	    --pidfile $(REDIS_DIR)/redis-$(REDIS_PORT).pid; \
	  for _ in $$(seq 50); do \
	    redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping >/dev/null 2>&1 && break; sleep 0.1; \
	  done; \
	  redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping >/dev/null; \
	fi
	@# PostgreSQL (jobs, drafts and keys shared by replicas) runs on the machine; start it
	@# when it is installed but stopped.
	@if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then \
	  echo "test-deps: starting PostgreSQL"; \
	  $(SUDO) service postgresql start >/dev/null 2>&1 || true; \
	  for _ in $$(seq 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done; \
	  pg_isready -h 127.0.0.1 -p 5432; \
	fi

# Three worker processes, each taking whole test files (module fixtures such as the
# llama.cpp server stay in one process): most of the suite waits on subprocesses and
# servers, so three overlap on two cores (18.8 min serially, 9.2 min so, when measured;
# on a machine whose embedder ran at 0.56x that speed, about 18 min). The longest files
# start first: tests/conftest.py, LONGEST_FIRST, with --no-loadscope-reorder.
PYTEST_WORKERS ?= 3

pytest: $(STAMP) bytecode test-deps
	RAGWRIGHT_TEST_REDIS_URL=redis://127.0.0.1:$(REDIS_PORT)/15 \
	  RAGWRIGHT_TEST_POSTGRES_URL=$(POSTGRES_URL) $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/remote_embedding.py
	$(BIN)/python benchmarks/scifact_quality.py
	$(BIN)/python benchmarks/embedders.py --runbooks-limit 40
	$(BIN)/python benchmarks/query_latency.py
	$(BIN)/python benchmarks/chat_pipeline.py
	$(BIN)/python benchmarks/assembly.py
	$(BIN)/python benchmarks/answer_contract.py
	$(BIN)/python benchmarks/support_check.py
	$(BIN)/python benchmarks/service_load.py
	$(BIN)/python benchmarks/job_faults.py
	$(BIN)/python benchmarks/ingest_workers.py
	$(BIN)/python benchmarks/ask_latency.py

# The converter comparison and the rendered-copy check (issue 22): the candidate
# converters go into their own venv, not the project's; rendering needs Debian's pandoc
# and LibreOffice Writer (apt-get install pandoc libreoffice-writer-nogui). About 20 min
# to render both corpora on 2 cores, then ingesting 8 copies (benchmarks/README.md).
BENCH_VENV ?= .ragwright/bench-venv
bench-formats: $(STAMP)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet pypdf pypdfium2 pdfminer.six pdfplumber \
		trafilatura beautifulsoup4 lxml markdownify html2text python-docx mammoth \
		'markitdown[pdf,docx,pptx]'
	$(BENCH_VENV)/bin/python benchmarks/render_corpus.py
	$(BENCH_VENV)/bin/python benchmarks/converters.py
	$(BENCH_VENV)/bin/python benchmarks/rendered_quality.py --ragwright-python $(BIN)/python
	$(BENCH_VENV)/bin/python benchmarks/rendered_quality.py --ragwright-python $(BIN)/python \
		--corpus samples --out benchmarks/results/rendered_answers_samples.json

clean:
	rm -rf $(VENV) .ragwright

# Regenerate docs/cli.md from --help (tests/test_docs.py fails when it drifts).
CLI_COMMANDS := "" chunks ingest status verify search ask "eval run" "eval calibrate" "eval compare" "eval report" "keys add" "keys list" "keys revoke" serve worker ingest-worker "model status" "model stop"
cli-docs: $(STAMP)
	@{ echo "# Command line"; echo; \
	  echo "Generated by \`make cli-docs\` from \`--help\`; \`tests/test_docs.py\` fails when an option is missing here."; \
	  for c in $(CLI_COMMANDS); do echo; echo "## ragwright $$c" | sed 's/ *$$//'; echo; echo '```'; \
	    COLUMNS=100 NO_COLOR=1 TERM=dumb $(BIN)/ragwright $$c --help | sed 's/[ ]*$$//'; echo '```'; done; \
	  echo; echo "Exit status: 0 success; 1 invalid input or configuration (one line on stderr, nothing already stored is lost); 2 usage error."; \
	} > docs/cli.md
