# The two entry points the README documents. Both set everything up from nothing.
.PHONY: demo test bootstrap

demo: bootstrap
	.venv/bin/karpy demo

test: bootstrap
	scripts/check

bootstrap:
	scripts/bootstrap
