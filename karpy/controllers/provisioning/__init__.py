"""Provisioning: notice pods nothing can run, batch them, solve, and launch NodeClaims."""
