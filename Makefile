# Commands that do everything on a fresh machine:
#   make demo   render the demo A3 Mega (TCPXO) GKE plan into rendered/ (no credentials, no cluster; render mode
#               is on only because of -e gpu_ops_render_dir, no inventory sets it)
#   make demo-operators   render the bare-metal GPU Operator / Network Operator plan into rendered-operators/
#   make test   the whole test suite (sanity, units, contract, integration, molecule, lint, build)
PYTHON ?= python3.11
VENV ?= .venv
REQUIREMENTS ?= tests/requirements-2.19.txt

.PHONY: demo demo-operators test venv clean benchmark

venv:
	bash scripts/bootstrap.sh $(VENV) $(PYTHON) $(REQUIREMENTS)

demo: venv
	rm -rf rendered
	$(VENV)/bin/ansible-playbook -i inventories/local playbooks/site.yml -e gpu_ops_render_dir=$(CURDIR)/rendered

demo-operators: venv
	rm -rf rendered-operators
	$(VENV)/bin/ansible-playbook -i inventories/baremetal-k8s playbooks/gpu_operator.yml -e gpu_ops_render_dir=$(CURDIR)/rendered-operators

test:
	bash scripts/test.sh

benchmark: venv
	$(VENV)/bin/python -m benchmarks

clean:
	rm -rf .venv .venv312 .build .collections rendered rendered-operators tests/output
