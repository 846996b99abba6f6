"""Tests of karpy_aws against moto's server on 127.0.0.1."""
