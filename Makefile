# The two entry points the README documents. Both set everything up from nothing.
.PHONY: demo test bootstrap crds docs

demo: bootstrap
	.venv/bin/karpy demo

test: bootstrap
	scripts/check

bootstrap:
	scripts/bootstrap

# Regenerate deploy/crds and docs/api.md from the models (a test fails when they are stale).
crds:
	.venv/bin/python -m karpy.apis.crds

# Regenerate docs/settings.md and docs/metrics.md from the code (a test fails when they are stale).
docs:
	.venv/bin/python -m karpy.runtime.reference
	.venv/bin/python -m karpy_aws.apis.fieldtable
