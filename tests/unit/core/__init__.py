"""Unit tests of the pure scheduling core."""
