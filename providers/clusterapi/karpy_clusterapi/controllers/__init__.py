"""The passes the Cluster API provider declares for the operator to run (`extension`)."""
