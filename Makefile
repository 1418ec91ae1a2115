# isergw: one build for everything. See README.md; `make help` lists the targets.
#
#   make            build the gateway, agent and CLI into build/
#   make run        install what is missing, build, start the demo gateway (and agent)
#   make test       install what is missing, build, run every suite: unit, integration, the same
#                   sanitized, fuzz corpora, and the VM rig (RDMA, bonding, kernel initiators)
#   make test-vm    the VM rig alone; make bench: the gateway against tgtd
#   V=1             show full command lines
#   SANITIZE=address,undefined   build the same tree with sanitizers (into build/san/)
#   WERROR=0        do not stop on warnings (never in CI)

include mk/config.mk
include mk/rules.mk
include mk/test.mk
include mk/fuzz.mk
include mk/pkg.mk
include mk/vm.mk
