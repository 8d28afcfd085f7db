"""The facts of one module, where they flow and what reaches them."""
