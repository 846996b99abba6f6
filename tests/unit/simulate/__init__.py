"""Unit tests of karpy simulate / karpy explain."""
