"""The semantic model of one module."""
