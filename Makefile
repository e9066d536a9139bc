# Commands that do everything on a fresh machine:
#   make demo   render the demo A3 Mega (TCPXO) GKE plan into rendered/ (no credentials, no cluster; render mode
#               is on only because of -e gpu_ops_render_dir, no inventory sets it)
#   make demo-operators   render the bare-metal GPU Operator / Network Operator plan into rendered-operators/
#   make demo-rdma        render the A3 Ultra (GPUDirect-RDMA) GKE plan into rendered-rdma/
#   make demo-rdma-a4x    render the A4X (GPUDirect-RDMA, arm64) GKE plan into rendered-rdma-a4x/
#   make test   the whole test suite (sanity, units, contract, integration, molecule, lint, build) on every
#               supported ansible-core line (scripts/test.sh)
PYTHON ?= python3.11
VENV ?= .venv
REQUIREMENTS ?= tests/requirements-2.19.txt

.PHONY: demo demo-operators demo-rdma demo-rdma-a4x test venv clean benchmark

venv:
	bash scripts/bootstrap.sh $(VENV) $(PYTHON) $(REQUIREMENTS)

demo: venv
	rm -rf rendered
	$(VENV)/bin/ansible-playbook -i inventories/local playbooks/site.yml -e gpu_ops_render_dir=$(CURDIR)/rendered

demo-operators: venv
	rm -rf rendered-operators
	$(VENV)/bin/ansible-playbook -i inventories/baremetal-k8s playbooks/gpu_operator.yml -e gpu_ops_render_dir=$(CURDIR)/rendered-operators

# inventories/gke-rdma has one cluster per RDMA profile; README's "RDMA demo renders" sums up both
demo-rdma: venv
	rm -rf rendered-rdma
	$(VENV)/bin/ansible-playbook -i inventories/gke-rdma playbooks/gke_gpudirect.yml --limit a3ultra-demo -e gpu_ops_render_dir=$(CURDIR)/rendered-rdma

demo-rdma-a4x: venv
	rm -rf rendered-rdma-a4x
	$(VENV)/bin/ansible-playbook -i inventories/gke-rdma playbooks/gke_gpudirect.yml --limit a4x-demo -e gpu_ops_render_dir=$(CURDIR)/rendered-rdma-a4x

test:
	bash scripts/test.sh

benchmark: venv
	$(VENV)/bin/python -m benchmarks

clean:
	rm -rf .venv .venv312 .venv216 .venv218 .venv220 .build .collections rendered rendered-operators rendered-rdma rendered-rdma-a4x tests/output
