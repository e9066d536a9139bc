# Two commands do everything on a fresh machine:
#   make demo   render the demo A3 Mega (TCPXO) GKE plan into rendered/ (no credentials, no cluster)
#   make test   the whole test suite (sanity, units, contract, integration, molecule, lint, build)
PYTHON ?= python3.11
VENV ?= .venv
REQUIREMENTS ?= tests/requirements-2.19.txt

.PHONY: demo test venv clean benchmark

venv:
	bash scripts/bootstrap.sh $(VENV) $(PYTHON) $(REQUIREMENTS)

demo: venv
	rm -rf rendered
	$(VENV)/bin/ansible-playbook -i inventories/local playbooks/site.yml

test:
	bash scripts/test.sh

benchmark: venv
	$(VENV)/bin/python -m benchmarks

clean:
	rm -rf .venv .venv312 .build .collections rendered tests/output
